"""The GPU demo's CPU miniature end to end (config.gpu_demo_cpu.yaml over config.gpu_demo.yaml), by the
command line docs/demo.md gives: the embedded Bible data, Admin profiling, the depth study at 6L-6L,
18L-6L and 36L-6L with post-LN / pre-LN / Admin, the Figure 10 map with every cell decoded, averaging,
decoding, scoring, significance, the tables and the plots, all tiny and on 2 cores."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from workflow_run import REPO, run_user_command

pytestmark = pytest.mark.slow

COMMAND = "snakemake --profile local --cores 2 all --configfile config.gpu_demo.yaml config.gpu_demo_cpu.yaml"


def test_the_documented_command_is_this_one():
    assert f"`{COMMAND}`" in (REPO / "docs" / "demo.md").read_text()


def test_gpu_demo_miniature_end_to_end(tmp_path):
    proc = run_user_command(tmp_path, COMMAND, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    cfg = yaml.safe_load((REPO / "config.gpu_demo.yaml").read_text())
    work, results = tmp_path / cfg["workdir"] / "smoke", tmp_path / cfg["results"] / "smoke"
    tables = (results / "tables.md").read_text()
    titles = [cfg["tables"]["table1"]["title"], cfg["tables"]["significance"]["title"]]
    titles += [c["title"] for c in cfg["tables"]["comparisons"]]
    for title in titles:
        assert f"## {title}" in tables, title
    # every model trained on the CPU without fairseq's fp16 (gpu: false), each run once
    trains = re.findall(r"pipeline_lib train .*", proc.stdout + proc.stderr)
    runs = sorted(p.name for p in (results / "experiments").iterdir() if p.name.startswith("stability-"))
    assert len(trains) == len(cfg["experiments"]) + len(runs)
    assert all(re.search(r"--amp none( |$)", t) for t in trains), trains
    for name in cfg["experiments"]:
        status = json.loads((work / "experiments" / name / "status.json").read_text())
        assert status["status"] in ("completed", "diverged"), (name, status)
        score = json.loads((results / "experiments" / name / "test.score.json").read_text())
        assert status["status"] == "diverged" or "bleu" in score["scores"], name
    # Table 1: a row per model it names, labelled by depth and residual variant
    label = {"post_ln": "Post-LN", "pre_ln": "Pre-LN", "admin": "Admin"}
    table1 = cfg["tables"]["table1"]
    expected = set()
    for name in [table1["baseline"], *table1["rows"]]:
        exp = cfg["experiments"][name]
        expected.add(f"{exp['encoder_layers']}L-{exp['decoder_layers']}L {label[exp['residual']]}")
    section = tables.split(f"## {table1['title']}", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")}
    assert expected <= rows and {r for r in rows if "L-" in r} == expected, rows
    # the map: one cell per method here (the overlay's grid), each decoded and scored
    stab = (results / "stability_map.md").read_text()
    assert len(runs) == len(cfg["stability_map"]["methods"]), runs
    for run in runs:
        assert (results / "experiments" / run / "test.score.json").is_file(), run
    assert "BLEU" in stab, stab[:2000]
    for png in ("plots/learning_curves.png", "plots/stability_map.png"):
        assert (results / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
