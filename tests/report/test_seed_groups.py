"""A paper row that is a mean over training runs (``experiments.<name>.seeds``): one run per seed
through every rule, one table row of mean ± sample std over the runs that converged.

The expansion and the checks run through the real schema and Plan; the dry run is docs/paper-scale.md's
command on config.iwslt14_fig10.yaml as typed; the table is rendered by the real report from score
files written here, and its numbers are computed here by hand.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.report.tables import render
from pipeline_lib.workflow import Plan
from pipeline_lib.workflow.rules import ReportRules
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema(REPO / SCHEMA_FILE)
BIN = Path(sys.executable).parent
GROUP_SEEDS = [11, 22, 33, 44]


def plan_of(config: dict) -> Plan:
    config = copy.deepcopy(config)
    validate_config(config, SCHEMA)
    return Plan(config)


def grouped_demo() -> dict:
    """config.yaml with a seed group ``admin_mean`` (four seeds) as Table 1's row and a comparison's row,
    against a single-run baseline; no stability map, no significance matrix."""
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg.pop("stability_map")
    base = cfg["experiments"]["demo_6L6L_postln"]
    cfg["experiments"] = {
        "demo_6L6L_postln": base,
        "admin_mean": {**base, "residual": "admin", "label": "6L-6L Admin", "seeds": GROUP_SEEDS},
    }
    cfg["tables"] = {
        "table1": {
            "baseline": "demo_6L6L_postln",
            "rows": ["admin_mean"],
            "metric": "tok_bleu",
            "paper": {"admin_mean": {"tok_bleu": 31.0, "source": "a paper's mean over runs"}},
        },
        "comparisons": [{"name": "cmp", "baseline": "demo_6L6L_postln", "rows": ["admin_mean"]}],
    }
    return cfg


def test_seeds_expand_into_one_run_per_seed_named_after_the_group():
    plan = plan_of(grouped_demo())
    runs = [f"admin_mean-s{s}" for s in GROUP_SEEDS]
    assert sorted(plan.experiments) == sorted(["demo_6L6L_postln", *runs])
    assert [plan.experiments[r]["seed"] for r in runs] == GROUP_SEEDS
    assert {plan.experiments[r]["residual"] for r in runs} == {"admin"}
    assert "seeds" not in plan.experiments[runs[0]]
    # the workflow builds, scores and reports every run; a group row has no paired bootstrap
    assert {plan.score_file(r) for r in runs} <= set(plan.all_targets())
    assert plan.table_experiments() == ["demo_6L6L_postln", *runs]
    assert ReportRules(plan).spec()["groups"] == {"admin_mean": {"label": "6L-6L Admin", "runs": runs}}
    assert plan.significance == {}


def test_seeds_with_seed_is_an_error_naming_the_key():
    cfg = grouped_demo()
    cfg["experiments"]["admin_mean"]["seed"] = 5
    with pytest.raises(ConfigError, match=r"config key 'experiments\.admin_mean\.seed'.*not both"):
        plan_of(cfg)


def test_a_generated_run_name_clashing_with_a_listed_one_is_an_error():
    cfg = grouped_demo()
    cfg["experiments"]["admin_mean-s22"] = cfg["experiments"]["demo_6L6L_postln"]
    with pytest.raises(ConfigError, match=r"config key 'experiments\.admin_mean\.seeds'.*admin_mean-s22"):
        plan_of(cfg)


@pytest.mark.parametrize("key", ["baseline", "systems"])
def test_the_significance_matrix_names_single_runs_not_a_group(key: str):
    cfg = grouped_demo()
    cfg["tables"]["significance"] = {"baseline": "demo_6L6L_postln", "systems": ["demo_6L6L_postln"]}
    cfg["tables"]["significance"][key] = "admin_mean" if key == "baseline" else ["admin_mean"]
    with pytest.raises(ConfigError, match=rf"config key 'tables\.significance\.{key}'.*'admin_mean-s11'"):
        plan_of(cfg)
    cfg["tables"]["significance"][key] = "admin_mean-s11" if key == "baseline" else ["admin_mean-s11"]
    assert plan_of(cfg).significance["table3"][0] in ("admin_mean-s11", "demo_6L6L_postln")


def test_iwslt_dry_run_as_typed_trains_five_seeds_per_row():
    """The command of docs/paper-scale.md in the repo root: every Table 2 row trains its five seeds,
    each its own train job with TC's --seed (iwslt14_de-en.md:20,47,90)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["snakemake", "all", "-n", "-p", "--configfile", "config.iwslt14_fig10.yaml"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    seeds: dict[str, list[int]] = {}
    for job in re.finditer(r"^rule train:\n(.*?)\nShell command: ([^\n]*)", proc.stdout, re.M | re.S):
        exp = re.search(r"wildcards: exp=(\S+)", job.group(1)).group(1)
        seed = re.search(r" --seed (\d+) ", job.group(2)).group(1)
        row, sep, tag = exp.rpartition("-s")
        if exp.startswith("iwslt_"):
            assert sep and tag == seed, exp
            seeds.setdefault(row, []).append(int(seed))
    assert {row: sorted(s) for row, s in seeds.items()} == {
        f"iwslt_6L6L_{m}": [1111, 2222, 3333, 4444, 5555] for m in ("postln", "preln", "admin")
    }


def write_run(tmp: Path, name: str, info: dict, bleu: float, diverged: bool = False) -> None:
    """A run's status.json and score JSON as the trainer and ``score`` write them (a diverged run's
    score file carries a number too, so only the group's own rule can leave it out)."""
    for key in ("status", "score", "train_log"):
        info[key] = str(tmp / name / Path(info[key]).name)
    Path(info["status"]).parent.mkdir(parents=True, exist_ok=True)
    status = {"status": "diverged", "update": 300, "epoch": 2, "reason": "loss nan"} if diverged else {}
    Path(info["status"]).write_text(json.dumps(status or {"status": "completed", "update": 500}))
    scores = {m: {"score": bleu, "signature": f"{m}|sig"} for m in ("tok_bleu", "bleu")}
    Path(info["score"]).write_text(json.dumps({"schema": "deepnmt-score/1", "scores": scores}))


def group_cells(tmp: Path, bleus: dict[int, float], diverged: set[int]) -> tuple[str, dict[str, str]]:
    """The rendered report, and Table 1's cells of the group's row by column header."""
    plan = plan_of(grouped_demo())
    spec = ReportRules(plan).spec()
    spec.pop("data")
    for name, info in spec["experiments"].items():
        seed = info["seed"]
        write_run(tmp, name, info, 30.0 if name == "demo_6L6L_postln" else bleus[seed], seed in diverged)
    text = render(spec)
    table1 = text.split("\n## ")[1]
    row = next(line for line in table1.splitlines() if line.startswith("| 6L-6L Admin |"))
    return text, dict(zip(table1_header(table1), [c.strip() for c in row.strip("|").split("|")], strict=True))


def table1_header(table: str) -> list[str]:
    return [c.strip() for c in next(line for line in table.splitlines() if line.startswith("| Model")).strip("|").split("|")]  # fmt: skip


def test_a_group_row_is_mean_and_sample_std_over_its_converged_runs(tmp_path: Path):
    bleus = {11: 31.2, 22: 32.0, 33: 30.5, 44: 2.0}  # seed 44 diverged: its number must not count
    text, cells = group_cells(tmp_path, bleus, diverged={44})
    kept = [bleus[s] for s in (11, 22, 33)]
    mean = sum(kept) / 3
    std = math.sqrt(sum((x - mean) ** 2 for x in kept) / (3 - 1))  # sample std: n - 1
    assert cells["BLEU↑"] == f"{mean:.2f} ± {std:.2f} (n=3; 1/4 diverged)"
    assert cells["Δ"] == f"{mean - 30.0:+.1f}"
    assert cells["Paper BLEU"] == "31.0" and cells["Δ paper"] == f"{mean - 31.0:+.1f}"
    assert "†" not in cells["BLEU↑"]
    # the diverged seed is named under the table, and the comparison's row reads the same numbers
    assert "(`admin_mean-s44`): training diverged at update 300" in text
    cmp_row = next(line for line in text.split("\n## ")[2].splitlines() if line.startswith("| 6L-6L Admin |"))
    assert f"{mean:.2f} ± {std:.2f} (n=3; 1/4 diverged)" in cmp_row
    assert "mean ± sample standard deviation" in text and "6L-6L Admin 11, 22, 33, 44" in text


def test_a_group_whose_every_run_diverged_reads_diverged(tmp_path: Path):
    text, cells = group_cells(tmp_path, dict.fromkeys(GROUP_SEEDS, 5.0), diverged=set(GROUP_SEEDS))
    assert cells["BLEU↑"] == "diverged" and cells["Δ paper"] == "–"
    assert all(f"(`admin_mean-s{s}`): training diverged" in text for s in GROUP_SEEDS)
