"""The README's "Your own data" example, run end to end as a new user would: the config exactly as
printed there, files named as it says, at smoke scale (config.smoke.yaml plus a CPU override). Then
an edit of the test reference must schedule translation, scoring and the report again."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from workflow_run import BIN, LOCAL_PROFILE, REPO

pytestmark = pytest.mark.slow
TINY = REPO / "tests" / "data" / "workflow_tiny"
CPU = {"smoke": {"gpu": False, "d_model": 16, "ffn_dim": 32, "heads": 2, "max_epoch": 1, "max_tokens": 4000,
                 "train_lines": 400, "bpe_merges": 300}}  # fmt: skip


def _snakemake(run: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    cmd = [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(run), "--profile",
           str(LOCAL_PROFILE), "--cores", "2", *args,
           "--configfile", "my_ende.yaml", str(REPO / "config.smoke.yaml"), "cpu.yaml"]  # fmt: skip
    return subprocess.run(cmd, cwd=run, capture_output=True, text=True, timeout=900, env=env)


def test_readme_own_data_example_runs_and_reruns_after_a_reference_edit(tmp_path: Path):
    marker = "# my_ende.yaml"
    readme = (REPO / "README.md").read_text()
    block = marker + readme.split("```yaml\n" + marker, 1)[1].split("```", 1)[0]
    (tmp_path / "my_ende.yaml").write_text(block)
    (tmp_path / "cpu.yaml").write_text(yaml.safe_dump(CPU))
    cfg = yaml.safe_load(block)
    data = tmp_path / cfg["datasets"]["my_ende"]["path"]
    data.mkdir(parents=True)
    for split in ("train", "valid", "test"):  # real sentence pairs; the pipeline sees only names and text
        shutil.copy(TINY / f"{split}.en", data / f"{split}.en")
        shutil.copy(TINY / f"{split}.fr", data / f"{split}.de")

    proc = _snakemake(tmp_path, "all")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    results = tmp_path / cfg["results"] / "smoke"
    tables = (results / "tables.md").read_text()
    assert "## Data" in tables and "| my_ende | test |" in tables
    assert _snakemake(tmp_path, "-n", "all").stdout.count("rule translate:") == 0

    ref = data / "test.de"
    lines = ref.read_text().splitlines()
    ref.write_text("\n".join([lines[0] + " Ende", *lines[1:]]) + "\n")
    plan = _snakemake(tmp_path, "-n", "all")
    assert plan.returncode == 0, plan.stderr[-3000:]
    rules = set(re.findall(r"^(?:local)?rule (\w+):", plan.stdout, re.M))
    assert {"preprocess", "translate", "score", "report"} <= rules, sorted(rules)
