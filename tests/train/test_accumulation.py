"""Gradient accumulation (--update-freq) gives the gradient of one merged batch: the per-target-token
mean of the label-smoothed loss over every micro-batch of the update, computed here directly with
autograd on a copy of the model. Adam hides a wrong scale, but the logged grad norm and the clip
threshold do not, so the test compares gradients and the norm, sequentially and with --cpu-workers."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir

from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.loss import label_smoothed_nll_loss
from pipeline_lib.train.trainer import Context, Trainer

EPS = 0.1


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    return make_bin_dir(tmp_path_factory.mktemp("accumulation"))


def make_trainer(bin_dir: Path, update_freq: int, cpu_workers: int = 1) -> Trainer:
    cfg = TrainConfig(
        data=str(bin_dir), source_lang="xx", target_lang="yy", save_dir=str(bin_dir.parent / "unused"),
        max_tokens=60, update_freq=update_freq, label_smoothing=EPS, cpu_workers=cpu_workers, max_update=1,
    )  # fmt: skip
    model_cfg = ModelConfig(24, 24, 2, 2, d_model=32, ffn_dim=64, heads=2, dropout=0.0)
    return Trainer(cfg, model_cfg, Context(24, None), DistributedEnv.from_environ({}, "cpu"))


def merged_batch_gradient(trainer: Trainer, batches: list, total_tokens: float) -> dict[str, torch.Tensor]:
    """d/dθ of sum(label-smoothed loss over all target tokens) / total_tokens, on a copy of the model."""
    model = copy.deepcopy(trainer.model).train()
    loss = sum(
        label_smoothed_nll_loss(model(b.src_tokens, b.prev_tokens), b.target, EPS, trainer.ctx.pad)[0]
        for b in batches
    )
    (loss / total_tokens).backward()
    return {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize(("update_freq", "cpu_workers"), [(1, 1), (3, 1), (3, 2)])
def test_accumulated_gradient_equals_the_merged_batch_gradient(
    bin_dir: Path, update_freq: int, cpu_workers: int
) -> None:
    torch.set_num_threads(1)
    trainer = make_trainer(bin_dir, update_freq, cpu_workers)
    train, _ = trainer._load_data()
    plan = train.batches(trainer.cfg.seed, 1, shuffle=True)
    batches = [train.collate(idx) for idx in plan[:update_freq]]
    assert len(batches) == update_freq and len({b.ntokens for b in batches}) >= min(update_freq, 2)
    total = float(sum(b.ntokens for b in batches))
    want = merged_batch_gradient(trainer, batches, total)

    trainer.updater.accumulate_gradients(batches, total, update=0)
    got = {name: p.grad.clone() for name, p in trainer.model.named_parameters()}
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-7, msg=name)
    # the norm that is logged and clipped against
    gnorm = trainer.updater.unscale_and_clip(torch.zeros(()), torch.zeros(()))[2].item()
    want_norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in want.values()])).item()
    assert gnorm == pytest.approx(want_norm, rel=1e-4)
