"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/train/average.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline_lib.checkpoint import load_checkpoint, save_checkpoint
from pipeline_lib.errors import CheckpointError
from pipeline_lib.train.average import average_checkpoints

# -- checkpoint averaging (pipeline_lib/train/average.py) ------------------------------------------


def _checkpoint(path: Path, weight: torch.Tensor, steps: torch.Tensor, update: int, epoch: int) -> Path:
    """A checkpoint with one float tensor and one integer buffer (a step counter, as some models keep)."""
    state = {
        "model_config": {"d_model": 1},
        "model": {"w": weight, "steps": steps},
        "num_updates": update,
        "epoch": epoch,
        "optimizer": {"state": {}},
        "scaler": {"scale": 1.0},
        "status": "ok",
    }
    save_checkpoint(state, path)
    return path


def test_average_sums_half_precision_in_float32_and_returns_half(tmp_path: Path) -> None:
    # fp16 steps by 2 at 2048: summed in fp16, 2048 + 1 + 1 stays 2048 (mean 682.5 after rounding);
    # summed in fp32 it is 2050, mean 683.33 -> 683.5 in fp16 (fairseq sums in fp32 for this reason).
    values = [2048.0, 1.0, 1.0]
    steps = torch.tensor([7], dtype=torch.int64)
    paths = [
        _checkpoint(tmp_path / f"c{i}.pt", torch.tensor([v], dtype=torch.float16), steps, i, 1)
        for i, v in enumerate(values)
    ]
    averaged = average_checkpoints(paths)["model"]["w"]
    assert averaged.dtype == torch.float16
    assert averaged.item() == torch.tensor([sum(values) / 3], dtype=torch.float16).item() == 683.5


def test_average_keeps_equal_integer_buffers_and_refuses_differing_ones(tmp_path: Path) -> None:
    steps = torch.tensor([3, 4], dtype=torch.int64)
    paths = [
        _checkpoint(tmp_path / f"c{i}.pt", torch.full((2,), float(i)), steps.clone(), i, 1) for i in range(3)
    ]
    out = average_checkpoints(paths)["model"]
    assert out["steps"].dtype == torch.int64
    assert torch.equal(out["steps"], steps)
    torch.testing.assert_close(out["w"], torch.full((2,), 1.0), rtol=0, atol=0)

    odd = _checkpoint(tmp_path / "odd.pt", torch.zeros(2), torch.tensor([3, 5]), 9, 1)
    with pytest.raises(CheckpointError, match="non-float tensor steps differs"):
        average_checkpoints([paths[0], odd])


def test_average_takes_the_newest_position_and_drops_optimizer_state(tmp_path: Path) -> None:
    steps = torch.tensor([0])
    paths = [
        _checkpoint(tmp_path / f"c{epoch}.pt", torch.zeros(1), steps, 100 * epoch, epoch)
        for epoch in (2, 3, 5)
    ]
    out = tmp_path / "avg.pt"
    save_checkpoint(average_checkpoints(paths), out)
    state = load_checkpoint(out)
    assert (state["num_updates"], state["epoch"]) == (500, 5)
    # a normal checkpoint's keys, without the optimizer and AMP scaler of any input
    assert state["optimizer"] is None and state["scaler"] is None
