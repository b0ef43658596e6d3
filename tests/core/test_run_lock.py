"""One process per run directory: a live holder refuses a second one by name; a dead one (SIGKILL,
a lost node's leftover record) never blocks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline_lib.run_lock import LOCK_NAME, RunDirBusy, RunDirLock

HOLD = textwrap.dedent("""
    import sys, time
    from pipeline_lib.run_lock import RunDirLock
    lock = RunDirLock.acquire(sys.argv[1])
    print("held", flush=True)
    time.sleep(120)
""")


def hold_in_subprocess(directory: Path, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, **env},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_refuses_a_second_process_naming_dir_and_holder(tmp_path: Path):
    proc = hold_in_subprocess(tmp_path, SLURM_JOB_ID="4242", SLURM_RESTART_COUNT="1")
    try:
        with pytest.raises(RunDirBusy) as info:
            RunDirLock.acquire(tmp_path, "training directory")
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"{tmp_path}: training directory in use by pid {proc.pid} on ")
        assert "SLURM job 4242 (restart 1)" in message
        # the refused process left the holder's record alone
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_holder_killed_with_sigkill_does_not_block(tmp_path: Path):
    proc = hold_in_subprocess(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with RunDirLock.acquire(tmp_path):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_record_left_by_a_lost_node_does_not_block_a_requeue(tmp_path: Path, monkeypatch):
    # what a requeued SLURM job finds: the old job's record, no live lock (the node is gone)
    record = {"host": "node-lost", "pid": 1, "slurm_job": "77", "since": "2026-01-01T00:00:00+0000"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(record) + "\n")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    lock = RunDirLock.acquire(tmp_path)
    ours = json.loads((tmp_path / LOCK_NAME).read_text())
    assert (ours["pid"], ours["slurm_job"], ours["slurm_restart"]) == (os.getpid(), "77", "1")
    lock.release()
    RunDirLock.acquire(tmp_path).release()  # released: taken again at once
