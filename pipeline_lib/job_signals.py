"""How a stage process reacts to being stopped: SIGTERM unwinds like Ctrl-C, and a stage started by
the workflow dies with its parent.

Snakemake (9.x) runs a local job as ``/bin/bash -c '<rule's shell line>'`` in a thread of its own
process and signals nothing when it is stopped: on SIGINT it waits for the running jobs, on SIGTERM
it waits "gracefully". The rules ``exec`` the stage (the stage is the job's process, there is no
shell to kill and orphan it), the Snakefile relays the stop to the running jobs
(``pipeline_lib/workflow/signal_relay.py``), and here the stage makes both outcomes clean:

- SIGTERM raises :class:`Terminated` (a ``SystemExit``), so ``finally`` blocks and the atomic writes
  (``atomic.py``) remove their temporary files and nothing appears under a final name; the trainer
  installs its own handler for the loop (save, exit 75: ``train/run_state.py``).
- Under the workflow (``STOP_WITH_PARENT`` in the environment, set by the Snakefile) the kernel
  sends the stage SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), so a job whose Snakemake was
  killed outright (SIGKILL, a closed terminal) does not run on and put an output in place after the
  run has ended. Outside the workflow a stage keeps running when its shell exits (``nohup``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from typing import Any

STOP_WITH_PARENT = "PIPELINE_LIB_STOP_WITH_PARENT"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class Terminated(SystemExit):
    """Raised in the main thread by SIGTERM; the exit status is the shell's 128 + 15."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


_STAGE_PID: int | None = None  # the process that installed the handler


def _default_sigterm() -> None:
    """In a forked child: SIGTERM kills at once, as without this module (``os.register_at_fork``)."""
    with contextlib.suppress(ValueError):  # not the main thread: cannot happen right after a fork
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_terminated(signum: int, _frame: Any) -> None:
    if os.getpid() != _STAGE_PID:
        # A forked worker (multiprocessing.Pool) must not run a Python handler for the SIGTERM of
        # Pool.terminate(): the handler runs between bytecodes only, so a SIGTERM that lands just before
        # the worker blocks on the task queue's lock is never handled (no EINTR follows), and the
        # pool's join waits forever (seen: preprocess --workers 2 hung the paper-mirror runs). The
        # fork hook above gives children the default action; this is the fallback for any child
        # forked before it was registered.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    print("received SIGTERM: stopping, no output is written", file=sys.stderr)
    raise Terminated


def terminate_unwinds() -> None:
    """SIGTERM raises :class:`Terminated` in this process instead of ending it where it stands."""
    global _STAGE_PID
    if _STAGE_PID is None:
        os.register_at_fork(after_in_child=_default_sigterm)
    _STAGE_PID = os.getpid()
    signal.signal(signal.SIGTERM, _raise_terminated)


def stop_with_parent(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Ask the kernel for SIGTERM when the parent process dies, if the workflow asked for it.

    Returns whether it is armed (Linux only; elsewhere the Snakefile's relay is the only path).
    """
    if environ.get(STOP_WITH_PARENT) != "1" or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return False
    if os.getppid() == 1:  # the parent died before the request was armed: nobody will signal us
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def install() -> None:
    """Both behaviours, for ``python -m pipeline_lib`` (called before any stage runs)."""
    terminate_unwinds()
    stop_with_parent()
