"""Every residual variant trains a 12L-12L model through the train CLI (loss falls) and resumes
bit-exactly from a checkpoint taken mid-run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.model.registry import needs_profile, residual_names

pytestmark = pytest.mark.slow  # 11 methods x 40 updates of a 12L-12L model: ~75 s
DEEP = ["--encoder-layers", "12", "--decoder-layers", "12", "--d-model", "16", "--ffn-dim", "32"]
UPDATES = 20


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    return make_bin_dir(tmp_path_factory.mktemp("data"))


def run(bin_dir: Path, save: Path, method: str, updates: int) -> None:
    extra = ["--admin-closed-form"] if needs_profile(method) else []
    argv = train_args(bin_dir, save, *DEEP, "--residual", method, "--max-update", str(updates), *extra)
    assert main([*argv, "--dropout", "0.1", "--lr", "2e-3"]) == 0


@pytest.mark.parametrize("method", residual_names())
def test_a_12l_12l_model_trains_and_resumes_exactly(bin_dir: Path, tmp_path: Path, method: str) -> None:
    full, split = tmp_path / "full", tmp_path / "split"
    run(bin_dir, full, method, UPDATES)
    run(bin_dir, split, method, UPDATES // 2)
    assert load_checkpoint(split / "checkpoint_last.pt")["num_updates"] == UPDATES // 2
    run(bin_dir, split, method, UPDATES)

    losses = [r["loss"] for r in read_log(full)]
    valid = [r["loss"] for r in read_log(full, "valid")]
    assert len(losses) == UPDATES
    print(f"{method}: valid loss after each epoch {' '.join(f'{v:.3f}' for v in valid)}")
    assert valid[-1] < valid[0] - 0.1, valid  # the held-out loss falls (less noisy than one batch's)
    assert [r["loss"] for r in read_log(split)] == losses
    a = load_checkpoint(full / "checkpoint_last.pt")["model"]
    b = load_checkpoint(split / "checkpoint_last.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
