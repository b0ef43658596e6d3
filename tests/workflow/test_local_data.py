"""A local corpus: every split file is an input of the rule that reads it, so editing the test
reference reruns the test split's preprocessing (and what follows it) instead of scoring against a
stale copy, and leaves the training side alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TINY = REPO / "tests" / "fixtures" / "workflow_tiny"


def snakemake(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(run_dir),
         "--configfile", "config.yaml", "--cores", "1", *args],
        cwd=run_dir, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip


def test_editing_a_local_test_file_reruns_the_test_preprocess(tmp_path: Path):
    data = tmp_path / "corpus"
    shutil.copytree(TINY, data)
    cfg = yaml.safe_load((REPO / "tests" / "fixtures" / "config.tiny.yaml").read_text())
    cfg["datasets"]["tiny"]["path"] = str(data)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    target = "work/data/tiny/tok-test/meta.json"
    done = snakemake(tmp_path, target, "work/data/tiny/tok/meta.json")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    again = snakemake(tmp_path, "-n", target)
    assert "Nothing to be done" in again.stdout + again.stderr
    ref = data / "test.fr"
    os.utime(ref, None)  # as an edit does; let the mtime move past the output's
    ref.write_text(ref.read_text().replace(" ", "  ", 1))
    stamp = (tmp_path / target).stat().st_mtime + 5
    os.utime(ref, (stamp, stamp))
    planned = snakemake(tmp_path, "-n", target)
    out = planned.stdout + planned.stderr
    assert planned.returncode == 0 and "rule preprocess_test" in out and "test.fr" in out, out[-3000:]
    train_side = snakemake(tmp_path, "-n", "work/data/tiny/tok/meta.json")
    assert "rule preprocess:" not in train_side.stdout + train_side.stderr
