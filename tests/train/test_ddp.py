"""Two-process gloo DDP (launched with torchrun) against one process with update_freq 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from tests.train.test_deferred_stats import assert_same_checkpoint, records

WORKER = str(Path(__file__).parents[1] / "helpers" / "train_ddp_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args: str) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()), *args,
    ]  # fmt: skip


def run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_ddp_gradient_equals_update_freq_2(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path)
    run([sys.executable, WORKER, str(bin_dir), str(tmp_path / "single.pt"), "2"])
    run(torchrun(WORKER, str(bin_dir), str(tmp_path / "ddp.pt"), "1"))
    single, ddp = torch.load(tmp_path / "single.pt"), torch.load(tmp_path / "ddp.pt")
    assert single.keys() == ddp.keys()
    assert max(float(g.abs().max()) for g in single.values()) > 0
    for name in single:
        torch.testing.assert_close(ddp[name], single[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_ddp_training_run_matches_single_process(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path)
    common = ("--max-update", "4", "--dropout", "0")
    run(
        [
            sys.executable,
            "-m",
            "pipeline_lib",
            *train_args(bin_dir, tmp_path / "one", *common, "--update-freq", "2"),
        ]
    )
    run(torchrun("-m", "pipeline_lib", *train_args(bin_dir, tmp_path / "two", *common)))
    one, two = read_log(tmp_path / "one"), read_log(tmp_path / "two")
    assert [r["update"] for r in two] == [1, 2, 3, 4]
    for a, b in zip(one, two, strict=True):
        assert abs(a["loss"] - b["loss"]) < 1e-4 and a["tokens_per_update"] == b["tokens_per_update"]
    x = load_checkpoint(tmp_path / "one" / "checkpoint_last.pt")["model"]
    y = load_checkpoint(tmp_path / "two" / "checkpoint_last.pt")["model"]
    for k in x:
        torch.testing.assert_close(y[k], x[k], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_ddp_deferred_fp16_takes_back_the_same_overflows(tmp_path: Path) -> None:
    """fairseq_fp16 over two ranks with overflows at the start and mid-run: --deferred-stats takes each
    back and reruns the next forward/backward on both ranks alike, giving the plain run's log and
    checkpoint bit for bit."""
    bin_dir = make_bin_dir(tmp_path)
    common = ("--max-update", "8", "--amp", "fairseq_fp16", "--fp16-init-scale", str(2**24),
              "--fp16-scale-window", "4", "--dropout", "0.1")  # fmt: skip
    for name, extra in (("plain", ()), ("deferred", ("--deferred-stats",))):
        run(torchrun("-m", "pipeline_lib", *train_args(bin_dir, tmp_path / name, *common, *extra)))
    plain, deferred = records(tmp_path / "plain"), records(tmp_path / "deferred")
    assert deferred == plain
    overflows = [r["overflows"] for r in plain if r["kind"] == "train"]
    assert overflows[0] >= 3 and sum(overflows[1:]) >= 1, overflows
    assert_same_checkpoint(
        tmp_path / "plain" / "checkpoint_last.pt", tmp_path / "deferred" / "checkpoint_last.pt"
    )
