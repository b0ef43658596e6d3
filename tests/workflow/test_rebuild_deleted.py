"""docs/running.md's "Rebuilding a deleted file", checked on this workflow with the installed
Snakemake: a deleted intermediate whose consumer exists is not rebuilt by asking for the consumer;
naming the file rebuilds just it; ``--forcerun <rule>`` reruns the rule and what is downstream."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.workflow.test_dryrun import REPO, job_stats, run_snakemake

RAW = "work/data/bible_enfr/raw/splits.json"  # prepare_demo's output, preprocess's input
TOK = "work/data/bible_enfr/tok/meta.json"


def test_the_documented_ways_to_rebuild_a_deleted_intermediate(tmp_path: Path):
    doc = (REPO / "docs" / "running.md").read_text(encoding="utf-8")
    section = re.search(r"### Rebuilding a deleted file\n(.*?)(\n#|\Z)", doc, re.S)
    assert section, "docs/running.md has no 'Rebuilding a deleted file' section"
    assert "checkpoint_avg.pt  # that file only" in section.group(1)
    assert "all --forcerun average" in section.group(1)

    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    built = run_snakemake(["--cores", "1", TOK], tmp_path, timeout=600)
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    (tmp_path / RAW).unlink()

    asked_for_consumer = run_snakemake(["-n", TOK], tmp_path)
    assert "Nothing to be done" in asked_for_consumer.stdout + asked_for_consumer.stderr
    forced = run_snakemake(["-n", TOK, "--forcerun", "prepare_demo"], tmp_path)  # targets first
    assert job_stats(forced.stdout + forced.stderr) == {"prepare_demo": 1, "preprocess": 1}

    named = run_snakemake(["--cores", "1", RAW], tmp_path, timeout=600)
    assert named.returncode == 0 and (tmp_path / RAW).is_file(), (named.stdout + named.stderr)[-3000:]
    after = run_snakemake(["-n", TOK], tmp_path)
    assert "Nothing to be done" in after.stdout + after.stderr  # the consumer is not redone
