"""Admin Figure 10 as the authors ran it: the trainer hands its update budget to the linear schedule
(TC radam_fairseq/linear_schedule.py), a linear run without a budget past the warm-up is refused, and
the stability map shows each decoded cell's BLEU next to the convergence verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_fixtures import make_bin_dir

from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.report.stability import read_grid, render_markdown
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


def _run(tmp_path: Path, name: str, status: dict, score: dict | None) -> dict:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "status.json").write_text(json.dumps(status))
    run = {"status": str(folder / "status.json"), "train_log": str(folder / "missing.jsonl")}
    if score is not None:
        (folder / "test.score.json").write_text(json.dumps(score))
        run["score"] = str(folder / "test.score.json")
    return run


def test_the_map_shows_each_decoded_cells_bleu_beside_its_verdict(tmp_path: Path):
    ok = {"status": "completed", "update": 100000, "valid": {"ppl": 5.1}}
    bad = {"status": "diverged", "criterion": "stuck", "update": 8000, "valid": {"ppl": 900.0}}
    scores = {"tok_bleu": {"score": 35.125}, "bleu": {"score": 33.0}}
    runs = {
        "pre": {"method": "pre_ln", **_run(tmp_path, "pre", ok, {"scores": scores})},
        # a diverged run's score file is the placeholder: no scores
        "post": {"method": "post_ln", **_run(tmp_path, "post", bad, {"scores": {}})},
    }
    for run in runs.values():
        run.update(depth="6-6", lr=3e-4, beta2=0.995, seed=1111)
    stab = {"runs": runs, "methods": ["post_ln", "pre_ln"], "depths": ["6-6"], "lrs": [3e-4],
            "betas2": [0.995], "max_update": 100000, "setup": "", "rule": {"text": "r"}}  # fmt: skip
    grid = read_grid(stab)
    assert grid[("pre_ln", "6-6", 3e-4, 0.995)][0].bleu == 35.125  # tokenized BLEU, not sacreBLEU
    assert grid[("post_ln", "6-6", 3e-4, 0.995)][0].bleu is None
    text = render_markdown(stab, grid)
    assert "| 0.0003 | 1/1: 5, BLEU 35.12 |" in text
    assert "| 0.0003 | **0/1**: stuck at the threshold at 8000 (900) |" in text
    assert "BLEU is not reported" not in text and "test BLEU" in text
