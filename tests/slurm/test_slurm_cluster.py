"""The local cluster itself: a batch job runs, and srun starts two gloo ranks that agree."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from slurm_helpers import REPO, python_exe


def _wait_done(job_id: str, timeout: float = 60.0) -> str:
    """Poll squeue (no accounting DB here) until the job has left the running states."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = subprocess.run(
            ["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        ).stdout.strip()
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
            return state
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} still {state!r} after {timeout}s")


def test_sbatch_runs_a_job_and_writes_its_output(tmp_path: Path, slurm_cluster):
    out = tmp_path / "job.out"
    job_id = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-p",
            slurm_cluster.partition,
            "-n",
            "1",
            "-c",
            "1",
            "--mem",
            "100",
            "-t",
            "2",
            "-o",
            str(out),
            "--wrap",
            'echo "job=$SLURM_JOB_ID partition=$SLURM_JOB_PARTITION cpus=$SLURM_CPUS_ON_NODE"',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert job_id.isdigit(), job_id
    assert _wait_done(job_id) == "COMPLETED"
    for _ in range(50):  # the output file is written by slurmd; give it a moment
        if out.exists() and out.read_text():
            break
        time.sleep(0.1)
    assert out.read_text().split() == [f"job={job_id}", f"partition={slurm_cluster.partition}", "cpus=1"]


def test_sbatch_reports_a_failing_job_as_failed(tmp_path: Path, slurm_cluster):
    job_id = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-p",
            slurm_cluster.partition,
            "-t",
            "1",
            "--mem",
            "100",
            "-o",
            str(tmp_path / "fail.out"),
            "--wrap",
            "exit 3",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert _wait_done(job_id) == "FAILED"


def test_srun_two_cpu_ranks_allreduce_with_gloo(tmp_path: Path, slurm_cluster):
    out_dir = tmp_path / "ranks"
    proc = subprocess.run(
        [
            "srun",
            "-p",
            slurm_cluster.partition,
            "-n",
            "2",
            "-c",
            "1",
            "--mem-per-cpu",
            "500",
            "-t",
            "3",
            "--kill-on-bad-exit=1",
            python_exe(),
            "-m",
            "pipeline_lib.train.dist_check",
            "--device",
            "cpu",
            "--out-dir",
            str(out_dir),
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in records] == [0, 1]
    assert {r["launcher"] for r in records} == {"srun"}
    assert {r["backend"] for r in records} == {"gloo"}
    assert {r["world_size"] for r in records} == {2}
    # Both ranks derived the same rendezvous address independently and got the same sum 1 + 2.
    assert len({r["master"] for r in records}) == 1
    assert [r["sum"] for r in records] == [3.0, 3.0]
