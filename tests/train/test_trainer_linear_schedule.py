"""Admin Figure 10 as the authors ran it: the trainer hands its update budget to the linear schedule
(TC radam_fairseq/linear_schedule.py), and a linear run without a budget past the warm-up is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from train_fixtures import make_bin_dir

from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.trainer import Context, Trainer


def train_config(bin_dir: Path, **kw) -> TrainConfig:
    return TrainConfig(
        data=str(bin_dir), source_lang="xx", target_lang="yy", save_dir=str(bin_dir.parent / "unused"),
        max_tokens=60, lr=3e-4, lr_scheduler="linear", warmup_updates=1, warmup_init_lr=1e-7, **kw,
    )  # fmt: skip


def test_the_trainer_decays_linearly_to_zero_at_its_max_update(tmp_path: Path):
    bin_dir = make_bin_dir(tmp_path / "data")
    cfg = train_config(bin_dir, max_update=101)
    model_cfg = ModelConfig(24, 24, 1, 1, d_model=16, ffn_dim=32, heads=2, dropout=0.0)
    trainer = Trainer(cfg, model_cfg, Context(24, None), DistributedEnv.from_environ({}, "cpu"))
    lr = trainer.optimizer.param_groups[0]["lr"]
    assert lr == 1e-7  # update 1, the warm-up's start
    assert trainer.schedule.step_update(51) == pytest.approx(3e-4 * (1 - 50 / 100))
    assert trainer.schedule.step_update(101) == 0.0


def test_a_linear_run_needs_max_update_past_the_warmup(tmp_path: Path):
    with pytest.raises(ConfigError, match="linear decays to 0 at --max-update"):
        train_config(tmp_path, max_epoch=50)
    with pytest.raises(ConfigError, match="linear decays to 0 at --max-update"):
        train_config(tmp_path, max_update=1)
