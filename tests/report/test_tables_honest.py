"""Tables a reader can trust: † exactly where the footnote says a system is significant (for every
metric a table can be tested on), no significance claimed below the translation floor, the decoding
settings, the paper's numbers beside ours, and a rerun hint that names the config file.

Scores and significance JSON come from the real ``score`` and ``significance`` stages run on small
hypothesis files; the tables' sections and experiment info come from the real Plan of config.yaml.
"""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import pytest
import yaml

from pipeline_lib.cli import main as pipeline
from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.segments import read_segments
from pipeline_lib.report.inputs import Run
from pipeline_lib.report.marks import paper_entries
from pipeline_lib.report.paper import PaperColumns
from pipeline_lib.report.seed_groups import load_groups
from pipeline_lib.report.tables import DAGGER, render, render_table1
from pipeline_lib.workflow import Commands
from pipeline_lib.workflow.rules import EvaluateRules, ReportRules
from pipeline_lib.workflow.schema import validate_config
from tests.workflow.test_plan import DEMO, REPO, SCHEMA, plan_of

REF = Path(__file__).parents[1] / "fixtures" / "evaluate" / "ref.en"
PAPER_CONFIGS = [
    "config.wmt14_en_fr.yaml",
    "config.wmt14_en_de.yaml",
    "config.wmt14_en_de_dlcl_lipschitz.yaml",
    "config.iwslt14_fig10.yaml",
]


def _variant(lines: list[str], p_drop: float, p_replace: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = [w for w in line.split() if rng.random() > p_drop]
        out.append(" ".join("the" if rng.random() < p_replace else w for w in words))
    return out


def hypotheses(refs: list[str]) -> dict[str, list[str]]:
    """Demo experiment -> output: a middling baseline, a clearly better system, a close one, a worse
    one, and one that does not translate (BLEU ~0)."""
    return {
        "demo_6L6L_postln": _variant(refs, 0.3, 0.2, seed=1),
        "demo_6L6L_admin": list(refs),
        "demo_12L6L_postln": _variant(refs, 0.3, 0.2, seed=2),
        "demo_12L6L_admin": _variant(refs, 0.55, 0.3, seed=3),
        "demo_12L6L_preln": ["the the of" for _ in refs],
        "demo_2L2L_preln_wide": list(refs),
    }


def write_run(tmp: Path, name: str, hyps: list[str], ppl: float = 300.0) -> dict[str, str]:
    """The files one experiment leaves for the report: hypotheses, the real score JSON, status.json."""
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "test.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (d / "status.json").write_text(json.dumps({"status": "completed", "update": 500, "valid": {"ppl": ppl}}))
    refs = REF.read_text(encoding="utf-8").splitlines()
    generate = [f"T-{i}\t{r}\nH-{i}\t-1.0\t{h}\n" for i, (r, h) in enumerate(zip(refs, hyps, strict=True))]
    (d / "test.generate").write_text("".join(generate), encoding="utf-8")  # translate's, no subwords here
    argv = ["score", "--hyp", str(d / "test.hyp"), "--ref", str(REF), "--output", str(d / "test.score.json")]
    argv += ["--generate", str(d / "test.generate"), "--subword", "none"]
    assert pipeline([*argv, "--metrics", "bleu", "tok_bleu", "--system", name]) == 0
    return {"hyp": str(d / "test.hyp"), "score": str(d / "test.score.json"), "status": str(d / "status.json"),
            "train_log": str(d / "none.jsonl")}  # fmt: skip


def significance(tmp: Path, table: str, plan, matrix: bool = False) -> str:
    """The real significance stage on the table's baseline and systems, tested on the plan's metric."""
    base, systems, _ = plan.significance[table]
    out = tmp / f"sig_{table}.json"
    argv = ["significance", "--ref", str(REF), "--baseline", f"{base}={tmp / base / 'test.hyp'}",
            "--systems", *[f"{s}={tmp / s / 'test.hyp'}" for s in systems], "--output", str(out),
            "--metrics", EvaluateRules(plan).significance_metric(table), "--moses-lang", "en", "--n-samples", "200",
            "--generate", *[f"{s}={tmp / s / 'test.generate'}" for s in [base, *systems]], "--subword", "none"]  # fmt: skip
    assert pipeline(argv + ([] if matrix else ["--no-matrix"])) == 0
    return str(out)


def demo_with_metric(metric: str | None) -> dict:
    """config.yaml with Table 1 and every comparison tested on ``metric`` (None: the key unset)."""
    cfg = copy.deepcopy(DEMO)
    for table in [cfg["tables"]["table1"], *cfg["tables"]["comparisons"]]:
        table.pop("metric", None)
        if metric is not None:
            table["metric"] = metric
    return cfg


def build_spec(
    tmp: Path, cfg: dict, outputs: dict[str, list[str]], matrix: bool = False, ppl: dict | None = None
) -> dict:
    plan = plan_of(cfg)
    spec = ReportRules(plan).spec()
    spec.pop("data")
    spec.pop("stability", None)
    for name, info in spec["experiments"].items():
        info.update(write_run(tmp, name, outputs[name], (ppl or {}).get(name, 300.0)))
    spec["significance"] = {
        t: significance(tmp, t, plan, matrix=t == "table3")
        for t in plan.significance
        if matrix or t != "table3"
    }
    return spec


def sections(text: str) -> dict[str, list[list[str]]]:
    """Title -> the table's rows as cells (header first), and the text under it as the last row."""
    out: dict[str, list[list[str]]] = {}
    for block in text.split("\n## ")[1:]:
        title, _, body = block.partition("\n")
        rows = [
            [c.strip() for c in line.strip("|").split("|")]
            for line in body.splitlines()
            if line.startswith("|")
        ]
        rows = [r for r in rows if not set("".join(r)) <= set(":-")]
        out[title] = [*rows, [body]]
    return out


def claimed_significant(body: str) -> set[str]:
    return set(re.findall(r"([^;.]+?): p = [0-9.]+ \((?:better|worse), significant\)", body))


@pytest.mark.parametrize("metric", ["tok_bleu", "bleu", None], ids=["tok_bleu", "bleu", "unset"])
def test_the_dagger_sits_where_the_footnote_says_for_every_metric(tmp_path: Path, metric: str | None):
    outputs = hypotheses(read_segments(REF))
    spec = build_spec(tmp_path, demo_with_metric(metric), outputs)
    tested = metric or "bleu"  # the schema's default
    tested_header = "BLEU↑" if tested == "tok_bleu" else "sacreBLEU↑"
    tables = sections(render(spec))
    assert len(tables) >= 3, list(tables)
    marked_somewhere = 0
    for title, rows in tables.items():
        if not rows[0] or rows[0][0] != "Model" or "Sources" in title:
            continue
        header, body = rows[0], rows[-1][0]
        claimed = {c.strip() for c in claimed_significant(body)}
        for row in rows[1:-1]:
            for col, cell in enumerate(row):
                if DAGGER in cell:
                    assert header[col] == tested_header, (title, header[col], row)
            marked = any(DAGGER in c for c in row)
            assert marked == (row[0] in claimed), (title, row, claimed)
            marked_somewhere += marked
    assert marked_somewhere >= 2, tables  # 6L-6L Admin in Table 1 and the comparisons


def test_no_claim_involves_a_system_below_the_floor(tmp_path: Path):
    outputs = hypotheses(read_segments(REF))
    spec = build_spec(tmp_path, DEMO, outputs, matrix=True)
    tables = sections(render(spec))
    residual = tables["Table 2: residual variants at 12L-6L"]
    preln = next(r for r in residual if r[0] == "12L-6L-64D Pre-LN")  # BLEU ~0, tested 'worse'
    assert not any(DAGGER in c for c in preln)
    body = residual[-1][0]
    assert "12L-6L-64D Pre-LN: p =" not in body
    assert (
        "Not tested against 6L-6L-64D Post-LN: 12L-6L-64D Pre-LN, below the translation floor of sacreBLEU 1.0"
        in body
    )
    assert any(DAGGER in c for r in residual[1:-1] for c in r)  # the others keep their marks
    matrix = next(rows for title, rows in tables.items() if title.startswith("Table 3"))
    preln_row = next(r for r in matrix if r[0].endswith("12L-6L-64D Pre-LN"))
    assert set(preln_row[2:]) == {"·", ""}, preln_row
    assert "below the translation floor" in matrix[-1][0]


def test_a_baseline_below_the_floor_takes_every_mark_and_all_below_leads_with_dev_ppl(tmp_path: Path):
    refs = read_segments(REF)
    outputs = {name: [f"the of {i}" for _ in refs] for i, name in enumerate(hypotheses(refs))}
    outputs["demo_6L6L_admin"] = list(refs)  # translates, but its baseline does not
    ppl = {"demo_6L6L_postln": 394.0, "demo_12L6L_postln": 673.0, "demo_12L6L_preln": 251.0}
    spec = build_spec(tmp_path, DEMO, outputs, ppl=ppl)
    tables = sections(render(spec))
    table1 = next(rows for title, rows in tables.items() if title.startswith("Table 1"))
    assert not any(DAGGER in c for r in table1[1:-1] for c in r)
    assert "No significance marks: the baseline 6L-6L-64D Post-LN (tokenized BLEU 0.0) is below the " \
           "translation floor of tokenized BLEU 1.0: the paired bootstrap compares noise." in table1[-1][0]  # fmt: skip
    assert "significant)" not in table1[-1][0]
    residual = tables["Table 2: residual variants at 12L-6L"][-1][0]  # no system of it translates
    lead = residual[: residual.index("| Model")]  # above the table, before any BLEU is read
    assert "**Read dev perplexity here.** No system of this table reaches the translation floor of " \
           "sacreBLEU 1.0" in lead  # fmt: skip
    assert "Dev perplexity, best first: 12L-6L-64D Pre-LN 251, 12L-6L-64D Admin 300, 6L-6L-64D Post-LN " \
           "394, 12L-6L-64D Post-LN 673." in lead  # fmt: skip
    assert "significant" not in residual
    best = tables["Table 5: the demo's best model, a wide shallow pre-LN model trained longer"][-1][0]
    assert "Read dev perplexity" not in best  # 6L-6L Admin translates
    assert "No significance marks: the baseline 6L-6L-64D Post-LN (sacreBLEU 0.0) is below" in best


def test_the_floor_is_a_config_key_carried_to_the_report():
    assert ReportRules(plan_of(DEMO)).spec()["translation_floor"] == 1.0
    cfg = copy.deepcopy(DEMO)
    cfg["evaluation"]["translation_floor"] = 0.0
    assert ReportRules(plan_of(cfg)).spec()["translation_floor"] == 0.0
    cfg["evaluation"]["translation_floor"] = -1
    with pytest.raises(ConfigError, match=r"evaluation\.translation_floor"):
        validate_config(cfg, SCHEMA)


def test_decoding_is_a_footnote_when_shared_and_a_column_when_not(tmp_path: Path):
    outputs = hypotheses(read_segments(REF))
    tables = sections(render(build_spec(tmp_path, DEMO, outputs)))
    table1 = next(rows for title, rows in tables.items() if title.startswith("Table 1"))
    assert "Beam / lenpen" not in table1[0]
    assert "Decoding: beam 4, lenpen 1.0 for every row" in table1[-1][0]
    best = tables["Table 5: the demo's best model, a wide shallow pre-LN model trained longer"]
    col = best[0].index("Beam / lenpen")
    assert {r[0]: r[col] for r in best[1:-1]}["2L-2L-256D Pre-LN"] == "4 / 2.0"  # wide_tuned
    assert {r[0]: r[col] for r in best[1:-1]}["6L-6L-64D Post-LN"] == "4 / 1.0"
    assert "Decoding:" not in best[-1][0]


def test_the_rerun_hint_names_the_config_file():
    from pipeline_lib.report.tables import rerun_command

    spec = {"tables_path": "results/wmt14_en_fr/tables.md", "configfiles": ["config.wmt14_en_fr.yaml"]}
    assert (
        rerun_command(spec) == "snakemake results/wmt14_en_fr/tables.md --configfile config.wmt14_en_fr.yaml"
    )
    assert rerun_command({"tables_path": "results/tables.md"}) == "snakemake results/tables.md"


def test_analysis_compares_the_baseline_too():
    plan = plan_of(DEMO)
    t1 = DEMO["tables"]["table1"]
    assert plan.analysis_systems() == [t1["baseline"], *t1["rows"]]
    assert f"{t1['baseline']}=" in Commands(plan).analyze("results/analysis")


# ---------------------------------------------------------------- the paper's numbers beside ours
def paper_tables(cfg: dict) -> list[tuple[str, dict]]:
    tables = cfg["tables"]
    out = [("table1", tables["table1"])] if "table1" in tables else []
    return out + [(c["name"], c) for c in tables.get("comparisons", [])]


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_every_row_of_the_paper_configs_has_the_papers_value(config: str):
    cfg = yaml.safe_load((REPO / config).read_text())
    validate_config(cfg, SCHEMA)
    plan_of(cfg)  # the cross-reference checks pass
    for name, table in paper_tables(cfg):
        rows = set([table.get("baseline", table["rows"][0]), *table["rows"]])
        # a compound-split table reads the paper's tok_bleu (its BLEU as its own eval script computed it)
        paper = paper_entries(table.get("paper"), table.get("metric", "bleu")) or {}
        assert rows == set(paper), (config, name, rows ^ set(paper))
        for row, entry in paper.items():
            has_value = entry.get(table.get("metric", "bleu")) is not None or entry.get("diverged")
            assert has_value or entry.get("unreported"), (config, name, row)
            if has_value:  # cited down to the table (or section, footnote) it is printed in
                assert re.search(r"Tables? \d|§\d|footnote \d", entry["source"]), (config, row)


def test_a_paper_number_for_a_name_outside_its_table_is_refused():
    cfg = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text())
    cfg["tables"]["comparisons"][1]["paper"]["enfr_6L6L_admin"] = {"tok_bleu": 41.5, "source": "x, Table 1"}
    with pytest.raises(ConfigError, match=r"tables\.comparisons\[1\]\.paper\.enfr_6L6L_admin.*not a row"):
        plan_of(cfg)
    cfg = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text())
    cfg["tables"]["table1"]["paper"]["enfr_6L6L_admin"] = {"tok_bleu": 41.5}  # no source
    with pytest.raises(ConfigError, match=r"tables\.table1\.paper\.enfr_6L6L_admin"):
        validate_config(cfg, SCHEMA)


def test_table1_shows_ours_the_papers_and_the_rows_within_tolerance():
    cfg = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text())
    spec = ReportRules(plan_of(cfg)).spec()
    ours = {"enfr_6L6L_default": 41.0, "enfr_6L6L_admin": 40.6, "enfr_60L12L_default": None,
            "enfr_60L12L_admin": 43.9}  # fmt: skip
    runs = {}
    for name, score in ours.items():
        status = {"status": "completed" if score is not None else "diverged", "update": 10}
        scores = (
            {"scores": {m: {"score": score, "signature": m} for m in ("tok_bleu", "bleu")}} if score else None
        )
        runs[name] = Run(name, spec["experiments"][name], status, scores)
    from pipeline_lib.report.marks import Significance

    lines = render_table1(spec, runs, Significance(None, "tok_bleu"))
    rows = sections("\n## " + "\n".join(lines))
    table = next(iter(rows.values()))
    header = table[0]
    cells = {r[0]: (r[header.index("Paper BLEU")], r[header.index("Δ paper")]) for r in table[1:-1]}
    assert cells == {
        "6L-6L Post-LN": ("41.3", "-0.3"),
        "6L-6L Admin": ("41.5", "-0.9"),
        "60L-12L Post-LN": ("diverged", "both diverged"),
        "60L-12L Admin": ("43.8", "+0.1"),
    }
    body = table[-1][0]
    assert "3 of 4 compared rows are within ±0.5 tokenized BLEU of the paper" in body
    assert (
        "Liu et al. 2020b (Very Deep Transformers), Table 1 (6L-6L Post-LN, 6L-6L Admin, 60L-12L Post-LN)"
        in body
    )
    assert PaperColumns(None, "tok_bleu", 0.5).notes(list(runs.values())) == []


def test_the_workflow_passes_the_configfile_to_the_spec(tmp_path: Path):
    from tests.workflow.test_dryrun import run_snakemake

    (tmp_path / "mine.yaml").write_text((REPO / "config.wmt14_en_fr.yaml").read_text())
    target = "results/wmt14_en_fr/report_spec.json"
    proc = run_snakemake(["--cores", "1", target, "--configfile", "mine.yaml"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    spec = json.loads((tmp_path / target).read_text())
    assert spec["configfiles"] == ["mine.yaml"] and spec["workdir"] == str(tmp_path)
    assert spec["snakefile"] == str(REPO / "Snakefile")


def test_the_dlcl_table_shows_wangs_eval_under_its_own_label():
    """config.wmt14_en_de_dlcl_lipschitz.yaml's Table 1 tests tok_bleu_wang (dlcl @c632ee2
    scripts/wmt_en2de_google_multi_bleu.sh): its column says so, reads that score (not tok_bleu) and
    stands beside the paper's tokenized BLEU."""
    from pipeline_lib.report.marks import Significance

    cfg = yaml.safe_load((REPO / "config.wmt14_en_de_dlcl_lipschitz.yaml").read_text())
    spec = ReportRules(plan_of(cfg)).spec()
    t1 = cfg["tables"]["table1"]
    runs = {}
    table1_rows = [t1["baseline"], *t1["rows"]]  # first, in order: their scores are checked below
    for i, name in enumerate([*table1_rows, *(g for g in spec["groups"] if g not in table1_rows)]):
        scores = {"tok_bleu": 20.0 + i, "tok_bleu_wang": 27.0 + i, "bleu": 19.0 + i}
        status = {"status": "completed", "update": 10}
        run_scores = {"scores": {m: {"score": v, "signature": m} for m, v in scores.items()}}
        for run in spec["groups"][name]["runs"]:  # Wang's rows: a mean of three seeds, equal here
            runs[run] = Run(run, spec["experiments"][run], status, run_scores)
    runs.update(load_groups(spec, runs))
    lines = render_table1(spec, runs, Significance(None, "tok_bleu_wang"))
    table = next(iter(sections("\n## " + "\n".join(lines)).values()))
    header = table[0]
    assert "BLEU (DLCL eval, compound split)↑" in header and "BLEU↑" not in header
    first = table[1]
    assert first[header.index("BLEU (DLCL eval, compound split)↑")] == "27.00 ± 0.00 (n=3)"
    assert first[header.index("Paper BLEU (DLCL eval, compound split)")] == "27.5"  # the paper's tok_bleu
    assert first[header.index("Δ paper")] == "-0.5"
    assert "dlcl's wmt_en2de_google_multi_bleu.sh" in table[-1][0]


def test_a_papers_mean_over_runs_shows_its_std():
    """Admin Table 2's IWSLT rows are means ± std over five runs: the std is a number of the config
    (tok_bleu_std) and the Paper cell prints it as the paper does."""
    cfg = yaml.safe_load((REPO / "config.iwslt14_fig10.yaml").read_text())
    validate_config(copy.deepcopy(cfg), SCHEMA)
    entries = cfg["tables"]["table1"]["paper"]
    assert entries["iwslt_6L6L_postln"]["tok_bleu_std"] == 0.23
    status = {"status": "completed", "update": 10}
    run = Run("iwslt_6L6L_postln", {}, status, {"scores": {"tok_bleu": {"score": 35.0, "signature": "x"}}})
    assert PaperColumns(entries, "tok_bleu", 0.5).cells(run) == ["35.64 ± 0.23", "-0.6"]
    bad = copy.deepcopy(cfg)
    bad["tables"]["table1"]["paper"]["iwslt_6L6L_postln"]["tok_bleu_std"] = -0.1
    with pytest.raises(ConfigError, match=r"iwslt_6L6L_postln"):
        validate_config(bad, SCHEMA)


def test_the_rerun_hint_works_from_any_directory(tmp_path: Path, monkeypatch):
    from pipeline_lib.report.spec_file import write_spec
    from pipeline_lib.report.tables import rerun_command

    run_dir = tmp_path / "my run"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)  # report_spec runs in the workflow's working directory
    spec = {
        "tables_path": "results/tables.md",
        "configfiles": ["my.yaml"],
        "snakefile": str(REPO / "Snakefile"),
    }
    write_spec(spec, run_dir / "spec.json")
    hint = rerun_command(json.loads((run_dir / "spec.json").read_text()))
    assert (
        hint == f"cd '{run_dir}' && snakemake -s {REPO / 'Snakefile'} results/tables.md --configfile my.yaml"
    )
