"""The path table (pipeline_lib/workflow/paths.py) is the one place a path is written: every file in the
dry-run DAG of the demo and the En-Fr config matches one of its patterns, the rules name no path of
their own, and Plan's path of each experiment and dataset is the output Snakemake resolves for it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

from pipeline_lib.workflow import Plan
from pipeline_lib.workflow.paths import TEMPLATES, Paths
from pipeline_lib.workflow.rules import BacktranslationRules, rule_logs
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RULES = sorted((REPO / "workflow" / "rules").glob("*.smk"))
CONFIGS = ["config.yaml", "config.wmt14_en_fr.yaml"]  # with stability map / with download and BT

Job = tuple[str, str, str]  # (rule, kind: output | log, path)


@cache
def plan_of(config: str) -> Plan:
    cfg = yaml.safe_load((REPO / config).read_text())
    validate_config(cfg, load_schema(REPO / SCHEMA_FILE))
    return Plan(cfg)


@cache
def dag_files(config: str, scratch: Path) -> frozenset[Job]:
    """(rule, output|log, path) of every job of ``snakemake -n all`` in an empty directory."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(BIN / "snakemake"), "-n", "-s", str(REPO / "Snakefile"), "--directory", str(scratch), "all",
         "--configfile", str(REPO / config)],
        cwd=scratch, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    files, rule = set(), None
    for line in proc.stdout.splitlines():
        if m := re.match(r"(?:local)?rule (\w+):$", line):
            rule = m.group(1)
        elif rule and (m := re.match(r"\s+(output|log): (.+)$", line)):
            files.update((rule, m.group(1), path) for path in m.group(2).split(", "))
    assert files, proc.stdout[-2000:]
    return frozenset(files)


@pytest.fixture(scope="module", params=CONFIGS)
def case(request, tmp_path_factory) -> tuple[Plan, frozenset[Job]]:
    scratch = tmp_path_factory.mktemp(request.param)
    return plan_of(request.param), dag_files(request.param, scratch)


def as_regex(pattern: str) -> re.Pattern[str]:
    """A table pattern as a regex: each {wildcard} one non-empty path component (no name here has a /)."""
    parts = re.split(r"\{\w+\}", pattern)
    return re.compile("[^/]+".join(re.escape(p) for p in parts) + r"\Z")


def test_every_file_of_the_dag_matches_a_pattern_of_the_table(case):
    plan, files = case
    # files only: a folder's pattern (``*_dir``) would match every file below it
    outputs = [as_regex(p) for n, p in plan.paths.patterns.items() if not n.endswith("_dir")]
    unmatched = [(rule, path) for rule, kind, path in files if kind == "output"]
    unmatched = [(r, p) for r, p in unmatched if not any(rx.match(p) for rx in outputs)]
    assert not unmatched, unmatched
    # a job's log is its own rule's pattern
    logs = rule_logs()
    wrong_logs = [
        (r, p) for r, kind, p in files if kind == "log" and not as_regex(plan.paths.log(r, logs[r])).match(p)
    ]
    assert not wrong_logs, wrong_logs


def test_plans_paths_are_the_outputs_snakemake_resolves(case):
    plan, files = case
    made = {(rule, path) for rule, kind, path in files if kind == "output"}
    want = set()
    for n in plan.experiments:
        want.add(("train_backtranslation" if n in plan.bt_names() else "train", plan.trained_marker(n)))
        if plan.needs_profile(n):
            want.add(("profile_admin", plan.admin_profile(n)))
    decoded = [n for n in plan.experiments if n not in plan.stability_runs or plan.stability_scores()]
    for n in decoded:
        want |= {("average", plan.checkpoint_avg(n)), ("score", plan.score_file(n))}
        want |= {("translate", plan.hyp_file(n)), ("translate", plan.generate_file(n))}
        want |= {("binarize", plan.bin_marker(n)), ("binarize_test", plan.eval_bin_marker(n, "test"))}
    for ds in {plan.eval_dataset(n) for n in decoded}:
        want |= {
            ("preprocess", plan.tok_marker(ds, "valid")),
            ("preprocess_test", plan.tok_marker(ds, "test")),
        }
        want |= {("apply_bpe", plan.bpe_marker(ds)), ("apply_bpe_test", plan.bpe_test_marker(ds))}
        want |= {("learn_bpe", plan.paths.of("subword", ds=ds))}
        stage = {"demo": "prepare_demo", "ding": "prepare_ding", "download": "download"}
        if plan.datasets[ds]["source"] in stage:  # a local dataset's raw files are the user's
            want.add((stage[plan.datasets[ds]["source"]], plan.raw_marker(ds)[0]))
        if plan.mono_raw(ds):
            want.add(("download_mono", plan.mono_raw(ds)))
    for bt in plan.backtranslation:
        want |= {
            ("translate_backtranslation", f)
            for f in BacktranslationRules(plan).shard_files(bt)
            + BacktranslationRules(plan).shard_files(bt, "txt")
        }
        want.add(("bt_mix", plan.bpe_marker(f"bt-{bt}")))
    want |= {("significance", plan.significance_file(t)) for t in plan.significance}
    assert want - made == set()
    # every final target is some job's output
    assert set(plan.all_targets()) <= {path for _, path in made}


def test_the_table_has_one_pattern_per_file_and_a_log_per_rule():
    patterns = list(Paths("w", "r", "l").patterns.values())
    assert len(set(patterns)) == len(patterns)
    rules = {m for f in RULES for m in re.findall(r"^(?:rule|use rule \w+ as) (\w+)", f.read_text(), re.M)}
    assert rules - {"all"} == set(rule_logs())


def test_each_rule_file_has_a_partner_module_owning_its_rules_logs():
    """workflow/rules/<file>.smk and pipeline_lib/workflow/rules/<file>.py: the partner's LOGS name
    exactly the rules of its file, and the file builds its partner and takes its logs from it."""
    from pipeline_lib.workflow.rules import RULE_FILES

    partners = {cls.__module__.rsplit(".", 1)[-1]: cls for cls in RULE_FILES}
    for smk in RULES:
        if smk.stem == "common":
            continue
        cls = partners[smk.stem]
        text = smk.read_text()
        rules = set(re.findall(r"^(?:rule|use rule \w+ as) (\w+)", text, re.M))
        assert rules == set(cls.LOGS), smk.name
        var = re.search(rf"^(\w+) = {cls.__name__}\(PLAN\)", text, re.M)
        assert var, f"{smk.name} does not build its partner {cls.__name__}"
        assert len(re.findall(r"^\s+log:\n\s+(\S+)", text, re.M)) == len(rules)
        assert all(
            log.startswith(f"{var.group(1)}.log(") for log in re.findall(r"^\s+log:\n\s+(\S+)", text, re.M)
        )
    assert set(partners) == {f.stem for f in RULES} - {"common"}


def test_roots_are_filled_and_wildcards_kept():
    paths = Paths("/scratch/w", "res", "res/logs")
    assert paths.trained == "/scratch/w/experiments/{exp}/trained.json"
    assert paths.of("score", exp="a", split="test") == "res/experiments/a/test.score.json"
    assert paths.log("translate", "{exp}.{split}") == "res/logs/translate/{exp}.{split}.log"
    with pytest.raises(KeyError, match="split"):
        paths.of("score", exp="a")
    with pytest.raises(AttributeError, match="no path named 'traned'"):
        _ = paths.traned
    assert all(t.startswith(("{workdir}/", "{results}/")) for t in TEMPLATES.values())


# A file an input, output or log of a rule names: a table entry, or a function of the plan. (A
# report caption is the workflow's own source, relative to the rule file, not a file of the DAG.)
LITERAL = re.compile(r"""^\s+(?!caption=)(?:\w+=)?(?:report\()?f?["'][^"']*/""")
SECTION = re.compile(r"^\s{4}(input|output|log):$")


@pytest.mark.parametrize("smk", RULES, ids=lambda p: p.name)
def test_rules_write_no_path_of_their_own(smk: Path):
    """A path written in a rule could drift from Plan's, unseen until a run misses its file."""
    section, rule, literals, logs = None, None, [], []
    for number, line in enumerate(smk.read_text().splitlines(), 1):
        if m := re.match(r"(?:rule|use rule \w+ as) (\w+)", line):
            rule = m.group(1)
        if m := SECTION.match(line):
            section = m.group(1)
        elif re.match(r"^\s{4}\S", line) or not line.strip():
            section = None
        elif section and LITERAL.match(line):
            literals.append(f"{smk.name}:{number}: {line.strip()}")
        if section == "log" and (m := re.search(r'P\.log\("(\w+)"\)', line)) and m.group(1) != rule:
            logs.append(f"{smk.name}:{number}: rule {rule} writes {m.group(1)}'s log")
    assert not literals, literals
    assert not logs, logs
