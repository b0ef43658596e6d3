"""Training randomness is a function of (seed, update, rank, micro-batch) and (seed, epoch) alone:
a resumed run is bit-identical to the uninterrupted one whatever the process's global RNG state at
resume, and whatever RNG state a checkpoint holds. That is why checkpoints need no RNG state (the
"rng" entry is dead weight; restoring it changes nothing)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import interval_path, load_checkpoint, save_checkpoint
from pipeline_lib.cli import main

RUN = ("--max-update", "6", "--save-interval-updates", "3", "--keep-interval-updates", "2")
DROPOUT = ("--dropout", "0.3", "--attention-dropout", "0.2", "--activation-dropout", "0.2")


def scramble_global_rng(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def test_resume_is_bit_identical_whatever_the_rng_state(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    bin_dir = make_bin_dir(tmp_path)
    full = tmp_path / "full"
    assert main(train_args(bin_dir, full, *RUN, *DROPOUT)) == 0

    # The same run stopped after update 3 (mid-epoch): its files, with the update-3 checkpoint as the last.
    resumed = tmp_path / "resumed"
    shutil.copytree(
        full, resumed, ignore=shutil.ignore_patterns("checkpoint*.pt", "status.json", "trained.json")
    )
    state = load_checkpoint(interval_path(full, 1, 3))
    assert state["num_updates"] == 3 and state["iterator"]["batch_index"] == 3
    if "rng" in state:  # whatever a checkpoint holds must not matter: replace it by another state
        scramble_global_rng(12345)
        state["rng"] = {**state["rng"], "python": random.getstate(), "torch": torch.get_rng_state()}
    save_checkpoint(state, resumed / "checkpoint_last.pt")

    scramble_global_rng(999)  # the process state at resume must not matter either
    assert main(train_args(bin_dir, resumed, *RUN, *DROPOUT)) == 0
    assert [r["update"] for r in read_log(resumed, "resume")] == [3]
    want = {r["update"]: r["loss"] for r in read_log(full)}
    got = {r["update"]: r["loss"] for r in read_log(resumed)}
    assert got == want
    a, b = (
        load_checkpoint(full / "checkpoint_last.pt")["model"],
        load_checkpoint(resumed / "checkpoint_last.pt")["model"],
    )
    assert all(torch.equal(a[k], b[k]) for k in a)
