"""``python -m pipeline_lib plan`` on a run whose jobs request no GPU gives CPU core-hours
(threads x runtime), not a column of zero GPU-hours; with GPUs requested it stays in GPU-hours.

The tiny config with 3 training threads and a 90-minute training runtime: its train rule requests
one GPU per job by default, which the local profile's set-resources pin to 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from workflow_run import BIN, REPO, tiny_config

from pipeline_lib.workflow.cli_check_config import check

THREADS, RUNTIME_MIN = 3, 90


def _config(tmp_path: Path) -> Path:
    cfg = tiny_config()
    cfg["threads"]["train"] = THREADS
    cfg.setdefault("resources", {}).setdefault("train", {})["runtime"] = RUNTIME_MIN
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _plan(config: Path, *extra: str) -> dict[str, list[str]]:
    """The rule table's rows, {rule: cells}, and its header under the key "header"."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "plan", *extra, "--configfile", str(config)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout.split("\n\n")[1 if "| rule |" in proc.stdout.split("\n\n")[1] else 2]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    return {"header": rows[0], **{cells[0]: cells[1:] for cells in rows[2:]}}


def test_cpu_run_plans_core_hours(tmp_path: Path) -> None:
    config = _config(tmp_path)
    trainings = len(check([config], REPO).plain_names())
    rows = _plan(config, "--profile", "profiles/local")
    assert rows["header"] == ["rule", "jobs", "threads per job", "core-hours requested"]
    assert rows["train"] == [str(trainings), str(THREADS), f"{trainings * THREADS * RUNTIME_MIN / 60:,.1f}"]


def test_gpu_run_plans_gpu_hours(tmp_path: Path) -> None:
    config = _config(tmp_path)
    trainings = len(check([config], REPO).plain_names())
    rows = _plan(config)  # no profile: the train rule's default of one GPU per job
    assert rows["header"] == ["rule", "jobs", "GPUs per job", "GPU-hours requested"]
    assert rows["train"] == [str(trainings), "1", f"{trainings * RUNTIME_MIN / 60:,.0f}"]
