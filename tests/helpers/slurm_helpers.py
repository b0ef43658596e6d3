"""Helpers shared by the slurm tests (kept out of conftest.py so that tests can import them)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent.parent
VENV_BIN = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"


def make_test_profile(dest: Path, partition: str, keep_gpu: bool = False, keep_retries: bool = False) -> Path:
    """A copy of profiles/slurm pointed at the local cluster: local partition, no account, fast polling.

    ``keep_gpu`` keeps the profile's GPU settings (model, CPUs per GPU) so that the submit lines are
    the real cluster's; otherwise GPU rules become CPU jobs that this GPU-less node can run (``gpu: 0``
    overrides the workflow's own default of one GPU, and memory/time are scaled to this node).
    ``keep_retries`` keeps the profile's ``retries`` (the preemption test relies on them); otherwise
    a failing job fails the test at once.
    """
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"].pop("slurm_account", None)
    profile["default-resources"]["slurm_partition"] = partition
    profile["default-resources"]["runtime"] = 10
    profile["default-resources"]["mem_mb"] = 500
    for rule, res in profile.get("set-resources", {}).items():
        res.pop("slurm_account", None)
        res["slurm_partition"] = partition
        if keep_gpu:
            if "mem_mb" in res:
                res["mem_mb"] = 500
            if "runtime" in res:
                res["runtime"] = 10
        else:
            gpu_rule = any(key in res for key in ("gpu", "gpu_model", "gres", "cpus_per_gpu"))
            for key in ("gpu", "gpu_model", "gres", "cpus_per_gpu", "constraint", "qos"):
                res.pop(key, None)
            if gpu_rule:
                res["gpu"] = 0
            # set-resources beat the rules' own resources (e.g. train's 8000 MB default).
            res["mem_mb"] = 500
            res["runtime"] = 10
        profile["set-resources"][rule] = res
    # No accounting database here: query squeue (MinJobAge=300 in start_cluster.sh) and poll fast.
    profile["slurm-status-command"] = "squeue"
    profile["slurm-init-seconds-before-status-checks"] = 1
    profile["latency-wait"] = 5
    if not keep_retries:
        profile["retries"] = 0
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return dest


def snakemake_cmd() -> list[str]:
    return [str(VENV_BIN / "snakemake")] if (VENV_BIN / "snakemake").exists() else ["snakemake"]


def python_exe() -> str:
    return str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else "python"
