"""The "Your own data" example of docs/own-data.md, run end to end as a new user would: the config exactly as
printed there (CPU scale: two 6L-6L-64D models of 300 updates), files named as it says, the tiny
corpus's sentence pairs as the data; every run has a dev curve of several points and its
checkpoint_best.pt. Then an edit of the test reference must schedule translation,
scoring and the report again, and no training.

On this corpus an epoch is 15 updates, so update 300 ends an epoch and the averaged checkpoints are
the interval ones at 100 and 200 (a corpus of a few thousand pairs or more averages 200 and 300)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from workflow_run import BIN, LOCAL_PROFILE, REPO

pytestmark = pytest.mark.slow
TINY = REPO / "tests" / "fixtures" / "workflow_tiny"


def _snakemake(run: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    cmd = [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(run), "--profile",
           str(LOCAL_PROFILE), "--cores", "2", *args,
           "--configfile", "my_ende.yaml"]  # fmt: skip
    return subprocess.run(cmd, cwd=run, capture_output=True, text=True, timeout=1500, env=env)


# Two 300-update trainings as printed: minutes on an idle 2-core machine (not measured here: estimated
# from the demo's 500-update runs); generous for a shared CPU under xdist.
@pytest.mark.timeout(1800)
def test_readme_own_data_example_runs_and_reruns_after_a_reference_edit(tmp_path: Path):
    marker = "# my_ende.yaml"
    doc = (REPO / "docs" / "own-data.md").read_text()
    block = marker + doc.split("```yaml\n" + marker, 1)[1].split("```", 1)[0]
    (tmp_path / "my_ende.yaml").write_text(block)
    cfg = yaml.safe_load(block)
    data = tmp_path / cfg["datasets"]["my_ende"]["path"]
    data.mkdir(parents=True)
    for split in ("train", "valid", "test"):  # real sentence pairs; the pipeline sees only names and text
        shutil.copy(TINY / f"{split}.en", data / f"{split}.en")
        shutil.copy(TINY / f"{split}.fr", data / f"{split}.de")

    proc = _snakemake(tmp_path, "all")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    results = tmp_path / cfg["results"]
    tables = (results / "tables.md").read_text()
    assert "## Data" in tables and "| my_ende | test |" in tables
    assert _snakemake(tmp_path, "-n", "all").stdout.count("rule translate:") == 0
    # as printed (no validate_interval_updates), each dev curve has several points, and each run its
    # checkpoint_best.pt, the weights of its lowest dev loss
    for exp in cfg["experiments"]:
        run_dir = tmp_path / cfg.get("workdir", "work") / "experiments" / exp
        records = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
        valid = [r for r in records if r["kind"] == "valid"]
        assert len(valid) >= 8, [r["update"] for r in valid]
        best = min(valid, key=lambda r: r["loss"])
        assert json.loads((run_dir / "status.json").read_text())["best"]["update"] == best["update"]
        assert (run_dir / "checkpoint_best.pt").is_file()

    ref = data / "test.de"
    lines = ref.read_text().splitlines()
    ref.write_text("\n".join([lines[0] + " Ende", *lines[1:]]) + "\n")
    plan = _snakemake(tmp_path, "-n", "all")
    assert plan.returncode == 0, plan.stderr[-3000:]
    rules = set(re.findall(r"^(?:local)?rule (\w+):", plan.stdout, re.M))
    assert {"preprocess_test", "translate", "score", "report"} <= rules, sorted(rules)
    assert not rules & {"preprocess", "train", "average"}, sorted(rules)  # the test split is apart
