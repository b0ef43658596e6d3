"""A stage stops cleanly: SIGTERM unwinds (no output under its final name, no temporary file left) and,
under the workflow, a stage dies with its parent instead of running on as an orphan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline_lib.job_signals import STOP_WITH_PARENT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# A stage that writes its output atomically and is still busy when the stop comes.
STAGE = textwrap.dedent(
    """
    import sys, time
    from pipeline_lib import job_signals
    from pipeline_lib.atomic import atomic_open
    job_signals.install()
    with atomic_open(sys.argv[1]) as out:
        out.write("half an output")
        print("writing", flush=True)
        time.sleep(60)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_leaves_nothing_under_the_final_name(tmp_path: Path):
    target = tmp_path / "test.hyp"
    proc = subprocess.Popen([sys.executable, "-c", STAGE, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []  # neither test.hyp nor its temporary file


# The parent starts the stage (as Snakemake's job thread does), reports its pid, then waits.
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "writing"
    print(child.pid, flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("under_workflow", [True, False])
def test_a_stage_under_the_workflow_dies_with_its_parent(tmp_path: Path, under_workflow: bool):
    env = {k: v for k, v in os.environ.items() if k != STOP_WITH_PARENT}
    if under_workflow:
        env[STOP_WITH_PARENT] = "1"
    target = tmp_path / "test.hyp"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, STAGE, str(target)], stdout=subprocess.PIPE,
                              text=True, env=env)  # fmt: skip
    stage = int(parent.stdout.readline())
    try:
        parent.kill()  # SIGKILL: the parent cannot pass anything on
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(stage) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(stage) is not under_workflow  # outside the workflow a stage survives its shell
        if under_workflow:
            assert not target.exists()
    finally:
        if _alive(stage):
            os.kill(stage, signal.SIGKILL)


def test_a_forked_worker_dies_of_sigterm_as_by_default():
    # multiprocessing.Pool ends its workers with SIGTERM (Pool.__exit__ -> terminate()); a worker that
    # inherited the stage's handler must die at once, not unwind: an exception there can leave a queue
    # lock held, and preprocess --workers 2 hung at its end that way
    stage = textwrap.dedent(
        """
        import multiprocessing as mp, time
        from pipeline_lib import job_signals
        job_signals.install()
        worker = mp.get_context("fork").Process(target=time.sleep, args=(60,))
        worker.start()
        time.sleep(0.5)
        worker.terminate()
        worker.join(10)
        print(worker.exitcode)
        """
    )
    proc = subprocess.run([sys.executable, "-c", stage], timeout=60, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == -signal.SIGTERM  # killed by the signal (143 would mean it unwound)


def test_a_forked_child_has_the_default_sigterm_from_its_first_instruction():
    # A Python handler runs only between bytecodes: a SIGTERM that lands while a pool worker is about to
    # block on the task queue's semaphore is never handled, and Pool.terminate()'s join hangs (it hung
    # preprocess --workers 2 in the paper-mirror runs). Forked children get the kernel's default action.
    stage = textwrap.dedent(
        """
        import multiprocessing as mp, signal, sys
        from pipeline_lib import job_signals
        job_signals.install()
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the stage unwinds
        ctx = mp.get_context("fork")
        worker = ctx.Process(target=lambda: sys.exit(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL))
        worker.start()
        worker.join(30)
        print(worker.exitcode)
        """
    )
    proc = subprocess.run([sys.executable, "-c", stage], timeout=60, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == 1  # sys.exit(True): the child's SIGTERM is SIG_DFL
