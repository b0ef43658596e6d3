"""Exact resume after a real SIGKILL / SIGTERM of a training subprocess, and corrupt-checkpoint fallback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.errors import CheckpointError
from pipeline_lib.train.trainer import EXIT_PREEMPTED

MAX_UPDATE = "150"
EXTRA = ("--max-update", MAX_UPDATE, "--save-interval-updates", "3")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, Path]:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("resume")
    bin_dir = make_bin_dir(root)
    reference = root / "reference"
    assert main(train_args(bin_dir, reference, *EXTRA)) == 0
    return bin_dir, reference


def losses(save_dir: Path) -> dict[int, float]:
    return {r["update"]: r["loss"] for r in read_log(save_dir)}


def same_weights(a: Path, b: Path) -> bool:
    x, y = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    return all(torch.equal(x[k], y[k]) for k in x)


def start(bin_dir: Path, save: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "pipeline_lib", *train_args(bin_dir, save, *EXTRA)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_update(proc: subprocess.Popen, save: Path, update: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    log = save / "train_log.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if log.exists() and any(r["update"] >= update for r in read_log(save)):
            return
        time.sleep(0.01)
    raise AssertionError("training did not reach the update in time")


def test_sigkill_mid_run_then_resume_is_bit_identical(setup, tmp_path: Path) -> None:
    bin_dir, reference = setup
    save = tmp_path / "killed"
    proc = start(bin_dir, save)
    wait_for_update(proc, save, 8)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (save / "status.json").exists(), "the run finished before it was killed"
    resumed_from = load_checkpoint(save / "checkpoint_last.pt")["num_updates"]
    assert 0 < resumed_from < int(MAX_UPDATE)
    assert main(train_args(bin_dir, save, *EXTRA)) == 0
    assert [r["update"] for r in read_log(save, "resume")] == [resumed_from]
    assert losses(save) == losses(reference)
    assert same_weights(save / "checkpoint_last.pt", reference / "checkpoint_last.pt")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_saves_exits_75_and_resumes(setup, tmp_path: Path, sig: int) -> None:
    """SLURM's TERM and a user's Ctrl-C both save after the current update; the rerun continues
    exactly, and its log holds every update once."""
    bin_dir, reference = setup
    save = tmp_path / "preempted"
    proc = start(bin_dir, save)
    wait_for_update(proc, save, 5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_PREEMPTED, err
    status = json.loads((save / "status.json").read_text())
    assert status["status"] == "preempted"
    saved = load_checkpoint(save / "checkpoint_last.pt")["num_updates"]
    assert saved == status["update"] and saved < int(MAX_UPDATE)
    assert main(train_args(bin_dir, save, *EXTRA)) == 0
    assert json.loads((save / "status.json").read_text())["status"] == "completed"
    assert losses(save) == losses(reference)
    updates = [r["update"] for r in read_log(save)]
    assert updates == sorted(set(updates)), "a resumed run repeated log records"
    assert same_weights(save / "checkpoint_last.pt", reference / "checkpoint_last.pt")


def test_fresh_start_replaces_the_log_of_an_attempt_without_checkpoint(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path)
    save = tmp_path / "run"
    save.mkdir()
    stale = [{"kind": "start", "update": 0}, {"kind": "train", "update": 1, "loss": 99.0}]
    (save / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stale))
    (save / ".checkpoint_last.pt.tmp4242").write_bytes(b"half a checkpoint")
    assert main(train_args(bin_dir, save, "--max-update", "4")) == 0
    records = [json.loads(line) for line in (save / "train_log.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in records].count("start") == 1
    assert 99.0 not in [r.get("loss") for r in records]
    assert not list(save.glob(".*.tmp*")), "a killed writer's temporary file survived the restart"


def test_fallback_takes_the_newest_checkpoint_by_training_position(tmp_path: Path, capsys) -> None:
    bin_dir = make_bin_dir(tmp_path)
    save = tmp_path / "run"
    assert main(train_args(bin_dir, save, "--max-epoch", "3")) == 0
    (save / "checkpoint_last.pt").write_bytes(b"damaged")
    os.utime(save / "checkpoint1.pt")  # the oldest checkpoint now has the newest mtime
    capsys.readouterr()
    assert main(train_args(bin_dir, save, "--max-epoch", "4")) == 0
    err = capsys.readouterr().err
    assert "falling back to" in err and "checkpoint3.pt" in err, err


def test_corrupt_checkpoint_errors_and_resume_falls_back(tmp_path: Path, capsys) -> None:
    bin_dir = make_bin_dir(tmp_path)
    full, broken = tmp_path / "full", tmp_path / "broken"
    assert main(train_args(bin_dir, full, "--max-epoch", "3")) == 0
    assert main(train_args(bin_dir, broken, "--max-epoch", "2")) == 0
    last = broken / "checkpoint_last.pt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(CheckpointError, match="checkpoint_last.pt is truncated or corrupt"):
        load_checkpoint(last)
    flipped = bytearray((broken / "checkpoint1.pt").read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF  # one byte inside tensor data
    (tmp_path / "flipped.pt").write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="flipped.pt"):
        load_checkpoint(tmp_path / "flipped.pt")
    capsys.readouterr()
    assert main(train_args(bin_dir, broken, "--max-epoch", "3")) == 0
    err = capsys.readouterr().err
    assert "falling back to" in err and "checkpoint2.pt" in err
    assert losses(broken) == losses(full)
    assert same_weights(broken / "checkpoint3.pt", full / "checkpoint3.pt")
    # No readable checkpoint at all: a one-line error, nothing silently restarted.
    for path in broken.glob("checkpoint*.pt"):
        path.write_bytes(b"garbage")
    assert main(train_args(bin_dir, broken, "--max-epoch", "4")) == 2
    assert "no readable checkpoint" in capsys.readouterr().err


def test_another_split_of_the_same_tokens_per_update_resumes_the_run(tmp_path: Path, capsys) -> None:
    """A run moved to cards of another size (max_tokens x update_freq kept) continues, mid-epoch."""
    bin_dir = make_bin_dir(tmp_path)
    save = tmp_path / "run"
    assert (
        main(train_args(bin_dir, save, "--max-update", "3", "--max-tokens", "100", "--update-freq", "2")) == 0
    )
    first = load_checkpoint(save / "checkpoint_last.pt")["iterator"]
    assert first["batch_index"] > 0 and first["plan_length"], "the first leg should stop inside an epoch"
    capsys.readouterr()
    assert (
        main(train_args(bin_dir, save, "--max-update", "6", "--max-tokens", "200", "--update-freq", "1")) == 0
    )
    err = capsys.readouterr().err
    assert "resuming from" in err and f"batch {first['batch_index']} ->" in err, err
    assert not (save / "superseded").exists()
    updates = [r["update"] for r in read_log(save)]
    assert updates == sorted(set(updates)) and updates[-1] == 6
