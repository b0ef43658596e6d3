"""Snakemake's own stop handling runs only after the running jobs were sent SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pipeline_lib.workflow import signal_relay


@pytest.fixture
def restored_handlers():
    saved = {s: signal.getsignal(s) for s in signal_relay.RELAYED}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("signum", signal_relay.RELAYED)
def test_the_signal_reaches_the_running_job_then_snakemakes_handler(restored_handlers, signum: int):
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    seen: list[tuple[int, int | None]] = []
    signal.signal(signum, lambda num, _frame: seen.append((num, job.poll())))  # Snakemake's handler
    signal_relay.install(jobs=lambda: [job])
    try:
        os.kill(os.getpid(), signum)
        time.sleep(0.1)  # the handler runs between bytecodes of the main thread
        assert job.wait(timeout=10) == -signal.SIGTERM
        assert [num for num, _ in seen] == [signum]
    finally:
        if job.poll() is None:
            job.kill()


def test_snakemakes_process_table_is_where_the_relay_looks():
    # The relay reads a private attribute of Snakemake's shell; a Snakemake upgrade that renames it
    # must fail here, not silently relay nothing.
    from snakemake.shell import shell

    assert isinstance(shell._processes, dict)
    assert signal_relay.snakemake_local_jobs() == []


def test_a_sigint_also_asks_snakemake_to_end_gracefully(restored_handlers, capfd):
    # Snakemake's log handler swallows a KeyboardInterrupt raised while it writes: the run must end all
    # the same, so a SIGINT also calls Snakemake's SIGTERM handler (its exit_gracefully), from a thread.
    graceful: list[int] = []
    interrupted: list[int] = []
    signal.signal(signal.SIGTERM, lambda num, _frame: graceful.append(num))  # the scheduler's handler
    signal.signal(signal.SIGINT, lambda num, _frame: interrupted.append(num))  # stands for a swallowed raise
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    signal_relay.install(jobs=lambda: [job])
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert job.wait(timeout=10) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while not graceful and time.monotonic() < deadline:
            time.sleep(0.01)
        assert graceful == [signal.SIGTERM] and interrupted == [signal.SIGINT]
        assert f"SIGINT: SIGTERM to the running jobs ({job.pid})" in capfd.readouterr().err
    finally:
        if job.poll() is None:
            job.kill()
