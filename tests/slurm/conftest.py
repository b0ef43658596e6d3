"""A real one-node SLURM cluster for the tests in this directory (all marked ``slurm``).

The cluster is started once per session by start_cluster.sh (apt-installing slurm-wlm + munge when
missing) and stopped afterwards, unless it was already running before the session. The tests are
skipped only when that is impossible on this machine (not root and SLURM not installed); with
CI=true they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SLURM_DIR = Path(os.environ.get("DEEPNMT_SLURM_DIR", "/tmp/deepnmt-slurm"))
PARTITION = os.environ.get("DEEPNMT_SLURM_PARTITION", "debug")


@dataclass(frozen=True)
class Cluster:
    conf: Path
    partition: str
    start_seconds: float


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _give_up(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"SLURM test cluster unavailable in CI: {reason}")
    pytest.skip(reason)


def _cluster_is_up(env: dict[str, str]) -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True, timeout=10
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return False
    return out.strip().rstrip("*~#") in ("idle", "mix", "alloc")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def slurm_cluster():
    conf = SLURM_DIR / "etc" / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    already_up = conf.is_file() and _cluster_is_up(env)
    started_here = False
    t0 = time.monotonic()
    if not already_up:
        if os.geteuid() != 0:
            _give_up("SLURM test cluster needs root to install slurm-wlm/munge and start slurmctld/slurmd")
        proc = subprocess.run(
            [str(HERE / "start_cluster.sh")], env=env, capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            # Root but the cluster does not start: a real failure, never a silent skip.
            pytest.fail(f"start_cluster.sh failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        started_here = True
    start_seconds = time.monotonic() - t0
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)  # every sbatch/srun/snakemake child finds the cluster
    try:
        yield Cluster(conf=conf, partition=PARTITION, start_seconds=start_seconds)
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        if started_here:
            subprocess.run([str(HERE / "stop_cluster.sh")], env=env, capture_output=True, timeout=120)


@pytest.fixture(autouse=True)
def _require_cluster(slurm_cluster):
    return slurm_cluster
