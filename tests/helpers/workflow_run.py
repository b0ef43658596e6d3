"""Run the real workflow (Snakefile) in a scratch directory: shared by the local end-to-end test
(tests/e2e/test_workflow.py, profiles/local) and the SLURM ones (tests/slurm/, a test copy of
profiles/slurm).

The run directory holds only ``config.yaml`` (tests/fixtures/config.tiny.yaml with its data path made
absolute, optionally edited); Snakemake reads the Snakefile from the repository and writes
``work/``, ``results/`` (logs in ``results/logs/``) and ``.snakemake/`` under the run directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCAL_PROFILE = REPO / "profiles" / "local"
TINY_CONFIG = REPO / "tests" / "fixtures" / "config.tiny.yaml"


def tiny_config() -> dict[str, Any]:
    """tests/fixtures/config.tiny.yaml with the dataset path made absolute (runs happen elsewhere)."""
    cfg = yaml.safe_load(TINY_CONFIG.read_text())
    for ds in cfg["datasets"].values():
        if "path" in ds:
            ds["path"] = str(REPO / ds["path"])
    return cfg


def write_config(work: Path, edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Write ``work/config.yaml`` from the tiny config, after ``edit(cfg)`` if given; returns it."""
    cfg = tiny_config()
    if edit is not None:
        edit(cfg)
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return cfg


def _snakemake_in(work: Path) -> tuple[list[str], dict[str, str]]:
    """The venv's snakemake on the repository's Snakefile, run in ``work``, and its environment: the
    venv's bin leads PATH, one OpenMP thread per job."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    return [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(work)], env


def snakemake_command(
    work: Path, *args: str, profile: Path = LOCAL_PROFILE, cores: int | None = 2
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``snakemake(...)`` (for runs started with Popen)."""
    cmd, env = _snakemake_in(work)
    cmd += ["--profile", str(profile)]
    if cores is not None:
        cmd += ["--cores", str(cores)]
    cmd += [*args, "--configfile", "config.yaml"]
    return cmd, env


def snakemake(
    work: Path,
    *args: str,
    profile: Path = LOCAL_PROFILE,
    cores: int | None = 2,
    timeout: float = 900,
) -> subprocess.CompletedProcess:
    """``snakemake -s Snakefile --directory work --profile <profile> ... --configfile config.yaml``.

    The venv's bin directory leads PATH so that the rules' ``python -m pipeline_lib`` (run locally or
    inside SLURM jobs, which inherit the environment through sbatch --export=ALL) is this one.
    ``cores=None`` leaves the parallelism to the profile (``jobs:`` for the SLURM executor).
    """
    cmd, env = snakemake_command(work, *args, profile=profile, cores=cores)
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout, env=env)


def user_command(work: Path, line: str) -> tuple[list[str], dict[str, str]]:
    """A command line as a user types it in the repository root (``snakemake --profile local ...
    --configfile config.x.yaml ...``), run in ``work`` instead: the venv's snakemake, the repository's
    Snakefile, ``--profile local`` as profiles/local, and every ``config*.yaml`` the repository's."""
    words = line.split()
    assert words[0] == "snakemake", line
    cmd, env = _snakemake_in(work)
    for i, word in enumerate(words[1:], 1):
        if words[i - 1] == "--profile" and word == "local":
            word = str(LOCAL_PROFILE)
        elif word.startswith("config") and word.endswith(".yaml"):
            word = str(REPO / word)
        cmd.append(word)
    return cmd, env


def run_user_command(work: Path, line: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """:func:`user_command`, run to its end in ``work`` (created if needed)."""
    work.mkdir(parents=True, exist_ok=True)
    cmd, env = user_command(work, line)
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout, env=env)
