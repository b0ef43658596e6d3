"""checkpoint_best.pt by dev loss, early stopping with --patience, and dev points by default. Real tiny
trainings via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.data.indexed import split_prefix, write_dataset
from pipeline_lib.train.validation import BestLoss


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    return make_bin_dir(tmp_path_factory.mktemp("data"))


def test_by_default_a_run_has_several_dev_points_and_keeps_its_best(bin_dir: Path, tmp_path: Path):
    assert main(train_args(bin_dir, tmp_path, "--max-epoch", "2")) == 0
    valid = read_log(tmp_path, "valid")
    assert len(valid) >= 8  # about 10 over the planned updates, not one per epoch
    best = min(valid, key=lambda v: v["loss"])
    state = load_checkpoint(tmp_path / "checkpoint_best.pt")
    assert state["num_updates"] == best["update"]
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["best"] == {"loss": best["loss"], "update": best["update"], "epoch": best["epoch"]}


def test_patience_ends_the_run_when_the_dev_loss_stops_falling(tmp_path: Path):
    # A dev set the training task contradicts (the source shifted, not reversed): its loss falls while
    # the model learns the target vocabulary, then rises as it learns to reverse.
    data = make_bin_dir(tmp_path / "data")
    rng = np.random.default_rng(1)
    src = [rng.integers(4, 19, size=int(rng.integers(3, 9))).tolist() for _ in range(16)]
    write_dataset(split_prefix(data, "valid", "xx"), src)
    write_dataset(split_prefix(data, "valid", "yy"), [[i + 1 for i in s] for s in src])
    save = tmp_path / "run"
    args = ("--max-epoch", "60", "--validate-interval-updates", "5", "--patience", "3")
    assert main(train_args(data, save, *args)) == 0
    valid = read_log(save, "valid")
    best = BestLoss.from_records(valid)
    status = json.loads((save / "status.json").read_text())
    assert status["status"] == "completed" and status["reason"].startswith("early stop")
    assert best.since == 3 and valid[-1]["update"] < 60 * 5  # stopped long before the budget
    assert load_checkpoint(save / "checkpoint_best.pt")["num_updates"] == best.update
    assert read_log(save, "early_stop")
