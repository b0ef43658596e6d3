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
import os
import signal
import subprocess
import threading
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


def relay_to(
    jobs: Callable[[], Iterable[subprocess.Popen]],
    signum: int,
    frame: Any,
    previous: Any,
    graceful: Any = None,
) -> None:
    """SIGTERM to every job still running, then what the signal did before. ``graceful``: Snakemake's
    SIGTERM handler, also called (from a thread: it takes the scheduler's lock, which the interrupted
    main thread may hold) after a SIGINT, so that the run ends even where Snakemake swallows the
    KeyboardInterrupt (its log handler's ``emit`` ignores one raised while it writes)."""
    running = [proc for proc in jobs() if proc.poll() is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):  # ended since poll()
            proc.send_signal(signal.SIGTERM)
    # os.write, not print: the main thread may be inside a write to the same buffered stderr
    pids = " ".join(str(proc.pid) for proc in running) or "none running"
    with contextlib.suppress(OSError):
        os.write(2, f"{signal.Signals(signum).name}: SIGTERM to the running jobs ({pids})\n".encode())
    if callable(graceful):
        threading.Thread(target=graceful, args=(signal.SIGTERM, None), daemon=True).start()
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


def install(jobs: Callable[[], Iterable[subprocess.Popen]] = snakemake_local_jobs) -> None:
    """Wrap the current SIGINT and SIGTERM handlers (main thread only, as ``signal.signal``)."""
    sigterm_handler = signal.getsignal(signal.SIGTERM)  # the scheduler's exit_gracefully
    for signum in RELAYED:
        previous = signal.getsignal(signum)
        if previous == signal.SIG_IGN:
            continue
        graceful = sigterm_handler if signum == signal.SIGINT else None

        def handler(num: int, frame: Any, previous: Any = previous, graceful: Any = graceful) -> None:
            relay_to(jobs, num, frame, previous, graceful)

        signal.signal(signum, handler)
