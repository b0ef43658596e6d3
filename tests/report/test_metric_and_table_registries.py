"""A new metric and a new table kind are registry entries only: registered here (and unregistered
after), they are computed by the score stage, planned by the workflow, checked with the config and
rendered in results/tables.md without a line changed elsewhere."""

from __future__ import annotations

import argparse
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate import cli_score
from pipeline_lib.evaluate import metric_registry as MR
from pipeline_lib.report import table_registry as TR
from pipeline_lib.report.tables import render
from pipeline_lib.workflow import Plan
from pipeline_lib.workflow.rules import ReportRules
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema(REPO / SCHEMA_FILE)
DEMO = yaml.safe_load((REPO / "config.yaml").read_text())
HYPS = ["the cat sat on the mat", "a dog"]
REFS = ["the cat sat on a mat", "a big dog barked"]


def length_ratio(inputs: MR.ScoreInputs) -> dict[str, Any]:
    """The dummy metric: hypothesis characters per reference character, x100."""
    hyp, ref = sum(map(len, inputs.hyps)), sum(map(len, inputs.refs))
    return {"score": 100.0 * hyp / ref, "signature": "len-ratio|chars"}


@pytest.fixture
def dummy_metric() -> Iterator[MR.MetricSpec]:
    spec = MR.register(MR.MetricSpec("len_ratio", "Len%↑", length_ratio, "length ratio", column=5))
    yield spec
    MR.unregister(spec.name)


def dummy_section(spec: dict, table: dict, runs: dict, sig: str | None) -> list[str]:
    return [
        f"## {table['title']}",
        "",
        *(f"- {name}: {runs[name].metric('bleu'):.1f}" for name in table["rows"]),
        "",
    ]


@pytest.fixture
def dummy_kind() -> Iterator[TR.TableKind]:
    kind = TR.register(TR.TableKind("dummy", lambda t: [("rows", r) for r in t["rows"]], dummy_section))
    yield kind
    TR.unregister(kind.key)


def config(tmp_path: Path, tables: dict) -> dict:
    cfg = copy.deepcopy(DEMO)
    cfg.update(workdir=str(tmp_path / "work"), results=str(tmp_path / "results"), tables=tables)
    validate_config(cfg, SCHEMA)
    return cfg


def score(plan: Plan, name: str, tmp_path: Path, metrics: list[str]) -> None:
    """The score stage, in process, as the workflow runs it; and the status the trainer would leave."""
    hyp, ref = tmp_path / f"{name}.hyp", tmp_path / "ref.fr"
    hyp.write_text("\n".join(HYPS[::-1] if name.endswith("admin") else HYPS) + "\n", encoding="utf-8")
    ref.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    parser = argparse.ArgumentParser()
    cli_score.add_arguments(parser)
    out = plan.score_file(name)
    args = parser.parse_args(["--hyp", str(hyp), "--ref", str(ref), "-o", out, "--system", name, "--metrics", *metrics])  # fmt: skip
    assert cli_score.run(args) == 0
    status = Path(plan.status_file(name))
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(json.dumps({"status": "completed", "update": 10}), encoding="utf-8")


def report(plan: Plan) -> str:
    spec = ReportRules(plan).spec()
    spec["data"] = {}  # no data or significance stage ran here: no cleaning counts, no marks
    spec["significance"] = {}
    return render(spec)


def test_a_registered_metric_is_scored_and_becomes_a_column(tmp_path: Path, dummy_metric: MR.MetricSpec):
    rows = ["demo_6L6L_postln", "demo_6L6L_admin"]
    plan = Plan(config(tmp_path, {"comparisons": [{"name": "c", "title": "C", "rows": rows}]}))
    for name in rows:
        score(plan, name, tmp_path, ["bleu", "len_ratio"])
    scores = json.loads(Path(plan.score_file(rows[0])).read_text())["scores"]
    assert list(scores) == ["bleu", "len_ratio"]
    expected = 100.0 * sum(map(len, HYPS)) / sum(map(len, REFS))
    assert scores["len_ratio"] == {"score": pytest.approx(expected), "signature": "len-ratio|chars"}
    text = report(plan)
    header = next(line for line in text.splitlines() if line.startswith("| Model |"))
    # a default column (the table lists no metrics), in its registered place: after chrF2
    assert header.endswith("| sacreBLEU↑ | TER↓ | METEOR↑ | chrF2↑ | Len%↑ | Δ |")
    assert f"| {expected:.1f} | – |" in text  # the baseline's cell, read from its score file
    assert "- Len%↑ `len-ratio|chars`" in text  # its signature under the table


def test_an_unregistered_metric_is_refused_by_score_and_config(tmp_path: Path):
    parser = argparse.ArgumentParser()
    cli_score.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--hyp", "h", "--ref", "r", "-o", "o", "--metrics", "len_ratio"])
    tables = {"comparisons": [{"name": "c", "rows": ["demo_6L6L_postln"], "metrics": ["bleu", "len_ratio"]}]}
    with pytest.raises(
        ConfigError, match=r"config key 'tables\.comparisons\[0\]\.metrics\[1\]': unknown metric"
    ):
        Plan(config(tmp_path, tables))


def test_a_table_is_tested_only_on_a_metric_its_kind_can_test(tmp_path: Path, dummy_metric: MR.MetricSpec):
    tables = {"comparisons": [{"name": "c", "rows": ["demo_6L6L_postln"], "metric": "len_ratio"}]}
    with pytest.raises(
        ConfigError, match=r"'tables\.comparisons\[0\]\.metric': 'len_ratio' cannot be tested"
    ):
        Plan(config(tmp_path, tables))
    with pytest.raises(ConfigError, match=r"'tables\.table1\.metric': 'chrf' cannot be tested"):
        Plan(
            config(
                tmp_path,
                {"table1": {"baseline": "demo_6L6L_postln", "rows": ["demo_6L6L_admin"], "metric": "chrf"}},
            )
        )


def test_a_registered_table_kind_is_planned_checked_and_rendered(tmp_path: Path, dummy_kind: TR.TableKind):
    tables = {
        "comparisons": [{"name": "c", "title": "C", "rows": ["demo_6L6L_postln"]}],
        "dummy": {"title": "The dummy table", "rows": ["demo_12L6L_preln"]},
    }
    plan = Plan(config(tmp_path, tables))
    assert plan.table_experiments() == ["demo_6L6L_postln", "demo_12L6L_preln"]
    assert "demo_12L6L_preln" in ReportRules(plan).spec()["experiments"]
    for name in plan.table_experiments():
        score(plan, name, tmp_path, ["bleu"])
    text = report(plan)
    bleu = json.loads(Path(plan.score_file("demo_12L6L_preln")).read_text())["scores"]["bleu"]["score"]
    assert f"## The dummy table\n\n- demo_12L6L_preln: {bleu:.1f}\n" in text
    assert text.index("## C") < text.index("## The dummy table") < text.index("## Sources")
    bad = copy.deepcopy(tables)
    bad["dummy"]["rows"] = ["no_such_run"]
    with pytest.raises(
        ConfigError, match=r"config key 'tables\.dummy\.rows': unknown experiment 'no_such_run'"
    ):
        Plan(config(tmp_path, bad))


def test_an_unregistered_table_kind_is_refused_naming_its_key(tmp_path: Path):
    tables = {"dummy": {"rows": ["demo_12L6L_preln"]}}
    with pytest.raises(
        ConfigError, match=r"config key 'tables\.dummy': unknown table kind \(known: table1, "
    ):
        Plan(config(tmp_path, tables))


def test_the_registries_are_read_without_torch_or_sacrebleu():
    import subprocess
    import sys

    code = (
        "import sys; import pipeline_lib.evaluate.metric_registry, pipeline_lib.report.table_registry; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'sacrebleu'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
