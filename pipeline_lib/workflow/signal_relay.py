"""Relay a stop sent to Snakemake alone to the jobs it runs locally.

Snakemake 9 runs a local job's shell line with ``subprocess.Popen`` from a worker thread
(``snakemake/shell.py``, the Popen kept in ``shell._processes`` by job id) and, when stopped, signals
none of them: SIGINT raises ``KeyboardInterrupt`` in the scheduler, which prints "Terminating
processes on user request" and then waits in ``ThreadPoolExecutor.shutdown()`` for every job to end
(``snakemake/executors/local.py``: ``cancel``); SIGTERM sets a "graceful" flag and also waits
(``scheduling/job_scheduler.py``: ``exit_gracefully``). Only a signal to the whole process group (a
terminal's Ctrl-C) reached the stages; ``kill <pid>`` left a training running for hours.

:func:`install`, called from the Snakefile's ``onstart`` (main thread, after the scheduler has
installed its own SIGTERM handler), wraps both handlers: first SIGTERM to every running local job
(the rules ``exec`` the stage, so that is the stage itself: the trainer saves and exits 75, any other
stage unwinds without output, ``pipeline_lib/job_signals.py``), then Snakemake's own handling, which
now only waits seconds. SIGTERM rather than the signal received: after a terminal's Ctrl-C the
trainer already has SIGINT, and a second SIGINT means "stop without saving".
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable, Iterable
from typing import Any

RELAYED = (signal.SIGINT, signal.SIGTERM)


def snakemake_local_jobs() -> list[subprocess.Popen]:
    """The Popen of every shell job Snakemake runs locally now (an empty list if that changed)."""
    from snakemake.shell import shell

    # a timeout, not a plain `with`: this runs in a signal handler, which must never wait forever
    locked = shell._lock.acquire(timeout=1)
    try:
        return list(getattr(shell, "_processes", {}).values())
    finally:
        if locked:
            shell._lock.release()


def relay_to(jobs: Callable[[], Iterable[subprocess.Popen]], signum: int, frame: Any, previous: Any) -> None:
    """SIGTERM to every job still running, then what the signal did before."""
    for proc in jobs():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # ended since poll()
                proc.send_signal(signal.SIGTERM)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


def install(jobs: Callable[[], Iterable[subprocess.Popen]] = snakemake_local_jobs) -> None:
    """Wrap the current SIGINT and SIGTERM handlers (main thread only, as ``signal.signal``)."""
    for signum in RELAYED:
        previous = signal.getsignal(signum)
        if previous == signal.SIG_IGN:
            continue

        def handler(num: int, frame: Any, previous: Any = previous) -> None:
            relay_to(jobs, num, frame, previous)

        signal.signal(signum, handler)
