"""Mutation gaps of tables (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test.

Every expected string or number below is written out by hand (or worked by hand from the inputs:
a mean, a difference, a rounding); no expected value is computed by calling tables.py itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_lib.report.inputs import Run
from pipeline_lib.report.marks import DEFAULT_FLOOR, Floor, Significance
from pipeline_lib.report.paper import PaperColumns
from pipeline_lib.report.seed_groups import SeedGroup
from pipeline_lib.report.tables import (
    _against_paper,
    _delta,
    _diverged_notes,
    _footnotes,
    _optional,
    _row,
    _signatures,
    comparison_section,
    curve_cell,
    curve_values,
    dev_perplexity,
    fmt,
    fmt_params,
    fmt_updates,
    lead_with_perplexity,
    matrix_section,
    metric_cell,
    paper_header,
    render,
    render_comparison,
    render_data,
    render_matrix,
    render_table1,
    rerun_command,
    row_curve_cell,
    seeds_note,
    table1_section,
    table_settings,
)


def info(enc: int, residual: str, **extra) -> dict:
    return {"encoder_layers": enc, "decoder_layers": 6, "residual": residual, **extra}


def scores(**values: float) -> dict:
    return {"scores": {m: {"score": v, "signature": f"{m}-sig"} for m, v in values.items()}}


def run(name: str, score: dict | None = None, status: dict | None = None, **kw) -> Run:
    return Run(name, kw.pop("info", info(6, "post_ln")), status or {"status": "completed"}, score, **kw)


# ------------------------------------------------------------------------------------ numbers
def test_fmt_rounds_to_one_decimal_by_default_and_shows_a_dash_for_none():
    assert fmt(None) == "–"
    assert fmt(None, 0) == "–"
    assert fmt(27.0) == "27.0"
    assert fmt(27.349) == "27.3"
    assert fmt(27.36) == "27.4"
    assert fmt(0.25) == "0.2"  # 0.25 is exact in binary: round half to even
    assert fmt(-1.26) == "-1.3"
    assert fmt(300.4, 0) == "300"
    assert fmt(3.14159, 3) == "3.142"


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "–"),
        (0, "0K"),
        (999, "1K"),
        (12_345, "12K"),
        (999_999, "1000K"),
        (1_000_000, "1.0M"),
        (1_049_999, "1.0M"),
        (1_050_001, "1.1M"),
        (61_000_000, "61.0M"),
        (99_940_000, "99.9M"),
        (99_999_999, "100.0M"),
        (100_000_000, "100M"),
        (123_456_789, "123M"),
        (999_999_999, "1000M"),
        (1_000_000_000, "1.0B"),
        (2_345_000_001, "2.3B"),
        (12_000_000_000, "12.0B"),
    ],
)
def test_fmt_params_suffixes_and_their_boundaries(n: int | None, text: str):
    assert fmt_params(n) == text


def test_fmt_updates_has_thousands_separators_truncates_and_dashes_a_missing_update():
    assert fmt_updates(run("a", status={"status": "completed", "update": 12345})) == "12,345"
    assert fmt_updates(run("a", status={"status": "completed", "update": 1234567})) == "1,234,567"
    assert fmt_updates(run("a", status={"status": "completed", "update": 999})) == "999"
    assert fmt_updates(run("a", status={"status": "completed", "update": 1999.9})) == "1,999"
    assert fmt_updates(run("a", status={"status": "completed", "update": 0})) == "0"
    assert fmt_updates(run("a", status={"status": "completed"})) == "–"


def test_row_is_a_markdown_table_line():
    assert _row(["6L-6L Post-LN", "27.31", "+0.42"]) == "| 6L-6L Post-LN | 27.31 | +0.42 |"
    assert _row(["a"]) == "| a |"
    assert _row(["", ""]) == "|  |  |"


def test_delta_is_run_minus_base_with_its_sign_and_a_dash_where_it_cannot_be_taken():
    base = run("base", scores(bleu=27.31))
    assert _delta(run("a", scores(bleu=27.73)), base, "bleu") == "+0.4"
    assert _delta(run("a", scores(bleu=26.01)), base, "bleu") == "-1.3"
    assert _delta(run("a", scores(bleu=27.31)), base, "bleu") == "+0.0"
    assert _delta(run("a", scores(bleu=37.31)), base, "bleu") == "+10.0"
    assert _delta(base, base, "bleu") == "–"  # the baseline itself
    twin = run("base", scores(bleu=20.0))  # same name, another object: compared
    assert _delta(twin, base, "bleu") == "-7.3"
    assert _delta(run("a", scores(tok_bleu=1.0)), base, "bleu") == "–"  # the run lacks the metric
    assert _delta(run("a", scores(bleu=1.0)), run("b", scores(ter=1.0)), "bleu") == "–"  # the base does
    assert (
        _delta(run("a", scores(bleu=28.0, ter=50.0)), run("b", scores(bleu=1.0, ter=52.5)), "ter") == "-2.5"
    )


def test_metric_cell_of_a_run_and_of_a_seed_group():
    r = run("a", scores(bleu=27.349, ter=55.55))
    assert metric_cell(r, "bleu") == "27.3"
    assert metric_cell(r, "bleu", "†") == "27.3†"
    assert metric_cell(r, "meteor") == "–"
    assert metric_cell(r, "meteor", "†") == "–†"
    group = SeedGroup("g", "G", [run("g-s1", scores(bleu=27.0)), run("g-s2", scores(bleu=28.0))])
    # mean 27.5, sample std sqrt(((-0.5)^2 + 0.5^2) / 1) = 0.7071; a group takes no mark
    assert metric_cell(group, "bleu", "†") == "27.50 ± 0.71 (n=2)"


def test_optional_metrics_are_those_scored_from_the_pair_or_the_generate_file():
    assert _optional("tok_bleu") is True  # the generate file
    assert _optional("tok_bleu_retok") is True  # the tokenized pair
    assert _optional("bleu") is False
    assert _optional("ter") is False


def test_table_settings_defaults_and_config_values():
    assert DEFAULT_FLOOR == 1.0
    assert table_settings(None) == (1.0, 0.5)
    assert table_settings({}) == (1.0, 0.5)
    assert table_settings({"translation_floor": 0.0, "paper_tolerance": 1.5}) == (0.0, 1.5)
    assert table_settings({"paper_tolerance": 0.25}) == (1.0, 0.25)
    assert table_settings({"translation_floor": 2.0}) == (2.0, 0.5)


def test_paper_header_names_the_metric_without_its_arrow():
    assert paper_header("tok_bleu") == ["Paper BLEU", "Δ paper"]
    assert paper_header("bleu") == ["Paper sacreBLEU", "Δ paper"]
    assert paper_header("ter") == ["Paper TER", "Δ paper"]


def test_against_paper_marks_differing_cells_and_makes_no_claim_without_one():
    assert _against_paper("+", None) == ("+", None)
    assert _against_paper("", "+") == ("", None)  # the diagonal
    assert _against_paper("·", "-") == ("·", None)  # no claim of ours
    assert _against_paper("+", "+") == ("+", True)
    assert _against_paper("=", "+") == ("= [paper +]", False)


# ------------------------------------------------------------------------------------ curves
def test_curve_values_take_the_last_point_at_or_before_each_fifth():
    assert curve_values([]) == []
    points = [(2, 10.0), (4, 20.0), (6, 30.0), (8, 40.0), (10, 50.0)]  # a point exactly at each fifth
    assert curve_values(points) == [10.0, 20.0, 30.0, 40.0, 50.0]
    late = [(5, 7.0), (10, 9.0)]  # fifths at 2, 4, 6, 8, 10
    assert curve_values(late) == [None, None, 7.0, 7.0, 9.0]
    assert curve_values(late, 2) == [7.0, 9.0]  # halves at 5 and 10
    assert curve_values(late, marks=1) == [9.0]
    assert curve_values([(3, 4.0)]) == [None, None, None, None, 4.0]  # fifths at 0.6, 1.2, ...


def test_curve_cell_rounds_to_whole_perplexities_and_dashes_missing_fifths():
    assert curve_cell([]) == "–"
    assert curve_cell([(5, 7.4), (10, 9.6)]) == "– · – · 7 · 7 · 10"
    assert curve_cell([(5, 7.4), (10, 9.6)], 2) == "7 · 10"
    assert curve_cell([(1, 2.5), (2, 3.5)], marks=2) == "2 · 4"  # halves to even


def test_row_curve_cell_of_a_run_and_of_a_seed_groups_mean():
    assert row_curve_cell(run("a", train_points=[(5, 7.4), (10, 9.6)])) == "– · – · 7 · 7 · 10"
    assert row_curve_cell(run("a")) == "–"
    early = run("g-s1", scores(bleu=1.0), train_points=[(1, 5.0), (10, 20.0)])  # 5 5 5 5 20
    late = run("g-s2", scores(bleu=1.0), train_points=[(5, 30.0), (10, 40.0)])  # – – 30 30 40
    empty = run("g-s3", scores(bleu=1.0))  # converged, no curve logged: left out
    stopped = run("g-s4", None, {"status": "diverged"}, train_points=[(5, 1e6), (10, 1e6)])
    group = SeedGroup("g", "G", [early, late, empty, stopped])
    # means: –, –, (5 + 30) / 2 = 17.5 -> 18, 17.5 -> 18, (20 + 40) / 2 = 30
    assert row_curve_cell(group) == "– · – · 18 · 18 · 30"
    same = SeedGroup(
        "h", "H", [run("h-s1", train_points=[(10, 10.0)]), run("h-s2", train_points=[(10, 13.0)])]
    )
    assert row_curve_cell(same) == "– · – · – · – · 12"  # 11.5 -> 12
    assert row_curve_cell(SeedGroup("e", "E", [empty])) == "–"
    assert row_curve_cell(SeedGroup("d", "D", [stopped])) == "–"


def test_dev_perplexity_reads_the_last_validation():
    assert dev_perplexity(run("a", status={"status": "completed", "valid": {"ppl": 12.5}})) == 12.5
    assert dev_perplexity(run("a", status={"status": "diverged", "valid": {"ppl": 610.0}})) == 610.0
    assert dev_perplexity(run("a", status={"status": "completed"})) is None
    assert dev_perplexity(run("a", status={"status": "completed", "valid": None})) is None
    assert dev_perplexity(run("a", status={"status": "completed", "valid": {}})) is None


# ------------------------------------------------------------------------------------ notes
def test_seeds_note_for_one_seed_several_seeds_and_seed_groups():
    one = (
        "Each row is one training run (seed {}): a difference between rows is not checked across seeds; "
        "the significance marks test the test set, not the training's variance."
    )
    assert seeds_note([run("a"), run("b")]) == one.format(1)  # no seed: seed 1
    assert seeds_note([run("a", info=info(6, "admin", seed=7))]) == one.format(7)
    mixed = [run("a", info=info(6, "admin", seed=3)), run("b"), run("c", info=info(6, "admin", seed="3"))]
    assert seeds_note(mixed) == "Seeds: 1, 3 (one training run per row)."
    ten = [run("a", info=info(6, "admin", seed=10)), run("b", info=info(6, "admin", seed=2))]
    assert seeds_note(ten) == "Seeds: 2, 10 (one training run per row)."  # sorted as numbers
    g1 = SeedGroup("g", "6L-6L Admin", [run("g-s11", info=info(6, "admin", seed=11)),
                                        run("g-s22", info=info(6, "admin", seed=22))])  # fmt: skip
    g2 = SeedGroup("h", "12L-6L Admin", [run("h-s5", info=info(12, "admin", seed=5))])
    assert seeds_note([run("base"), g1, g2]) == (
        "A row over seeds shows mean ± sample standard deviation (n − 1) over its runs that converged "
        "(n = how many; a diverged run is counted, not averaged); Δ and Δ paper compare that mean, and its "
        "perplexities are the mean over the same runs. Seeds: 6L-6L Admin 11, 22; 12L-6L Admin 5. "
        "No † on such a row: the paired bootstrap tests one run's output, not the seed variance "
        "(tables.significance compares single runs)."
    )


def test_signatures_are_per_metric_sorted_deduplicated_and_skip_diverged_and_unsigned_runs():
    a = run("a", {"scores": {"bleu": {"score": 1.0, "signature": "sig-b"}, "ter": {"score": 2.0}}})
    b = run("b", {"scores": {"bleu": {"score": 1.0, "signature": "sig-a"}}})
    c = run("c", {"scores": {"bleu": {"score": 1.0, "signature": "sig-b"}}})
    gone = run("d", {"scores": {"bleu": {"score": 1.0, "signature": "sig-z"}}}, {"status": "diverged"})
    group = SeedGroup("g", "G", [run("g-s1", {"scores": {"ter": {"score": 1.0, "signature": "t"}}})])
    assert _signatures([a, b, c, gone, group], ["bleu", "ter", "meteor"]) == [
        "- sacreBLEU↑ `sig-a`",
        "- sacreBLEU↑ `sig-b`",
        "- TER↓ `t`",
    ]
    assert _signatures([a], []) == []


def test_diverged_notes_name_the_update_epoch_clause_and_reason():
    stuck = run("deep", None, {"status": "diverged", "update": 400, "epoch": 1, "criterion": "stuck",
                               "reason": "mean training nll 9.26"}, info=info(12, "post_ln"))  # fmt: skip
    plain = run("wide", None, {"status": "diverged", "update": 7, "epoch": 3, "reason": "nan"})
    odd = run(
        "odd", None, {"status": "diverged", "update": 9, "epoch": 2, "criterion": "mystery", "reason": "r"}
    )
    group = SeedGroup("g", "G", [run("g-s1", scores(bleu=1.0)), run("g-s2", None, {"status": "diverged",
                                                                                   "update": 5, "epoch": 1,
                                                                                   "reason": "x"})])  # fmt: skip
    assert _diverged_notes([run("ok", scores(bleu=1.0)), stuck, plain, odd, group]) == [
        "- 12L-6L Post-LN (`deep`): training diverged at update 400, epoch 1 (stuck at the threshold): "
        "mean training nll 9.26",
        "- 6L-6L Post-LN (`wide`): training diverged at update 7, epoch 3: nan",
        "- 6L-6L Post-LN (`odd`): training diverged at update 9, epoch 2 (mystery): r",
        "- 6L-6L Post-LN (`g-s2`): training diverged at update 5, epoch 1: x",
    ]


def test_lead_with_perplexity_only_where_no_system_translates():
    lead = (
        "**Read dev perplexity here.** No system of this table reaches the translation floor of sacreBLEU "
        "1.0: none translates yet, so its BLEU differences are noise; BLEU is shown for completeness and no "
        "significance is claimed."
    )
    floor = Floor(1.0, "bleu")
    a = run("a", scores(bleu=0.5), {"status": "completed", "valid": {"ppl": 300.4}}, info=info(6, "admin"))
    b = run("b", scores(bleu=0.2), {"status": "completed", "valid": {"ppl": 251.6}}, info=info(12, "admin"))
    gone = run("c", None, {"status": "diverged", "valid": {"ppl": 99.0}}, info=info(24, "admin"))
    none = run("d", scores(bleu=0.1), {"status": "completed"}, info=info(2, "admin"))
    assert lead_with_perplexity([a, b, gone, none], floor) == [
        lead + " Dev perplexity, best first: 24L-6L Admin 99 (diverged), 12L-6L Admin 252, 6L-6L Admin 300.",
        "",
    ]
    assert lead_with_perplexity([none], floor) == [lead, ""]
    assert lead_with_perplexity([a, run("e", scores(bleu=1.0))], floor) == []  # 1.0 is on the floor
    assert lead_with_perplexity([], floor) == []


def test_footnotes_decoding_significance_paper_and_divergence_in_order(tmp_path: Path):
    dec = {"beam": 5, "lenpen": 0.6}
    base = run("base", scores(bleu=20.0), info=info(6, "post_ln", decoding=dec))
    other = run("other", scores(bleu=21.0), info=info(6, "admin", decoding=dec))
    gone = run("gone", None, {"status": "diverged", "update": 3, "epoch": 1, "reason": "r"},
               info=info(12, "admin"))  # fmt: skip
    rows = [base, other, gone]
    sig = Significance(None).against(base, rows, Floor(1.0))
    paper = PaperColumns({"other": {"bleu": 21.3, "source": "P, Table 2"}}, "bleu", 0.5)
    assert _footnotes(rows, base, sig, paper) == [
        "",
        "Decoding: beam 5, lenpen 0.6 for every row (fairseq's lenpen: log-probability / length^lenpen).",
        "",
        "Paper: the published sacreBLEU of each row; Δ paper = ours − paper. 1 of 1 compared rows are "
        "within ±0.5 sacreBLEU of the paper (a run that diverged agrees with a paper row that diverged).",
        "Sources: P, Table 2 (6L-6L Admin).",
        "",
        "- 12L-6L Admin (`gone`): training diverged at update 3, epoch 1: r",
    ]
    lone = Significance(None).against(base, [base], Floor(1.0))
    assert _footnotes([base], base, lone, PaperColumns(None, "bleu", 0.5)) == [
        "",
        "Decoding: beam 5, lenpen 0.6 for every row (fairseq's lenpen: log-probability / length^lenpen).",
    ]
    gone_base = Significance(None).against(gone, rows, Floor(1.0))
    assert _footnotes([gone], gone, gone_base, PaperColumns(None, "bleu", 0.5)) == [
        "",
        "No significance marks: the baseline 12L-6L Admin diverged.",
        "",
        "- 12L-6L Admin (`gone`): training diverged at update 3, epoch 1: r",
    ]


# ------------------------------------------------------------------------------------ rerun hint
def test_rerun_command_defaults_quoting_and_when_to_name_the_snakefile():
    assert rerun_command({}) == "snakemake results/tables.md"
    assert rerun_command({"tables_path": "out/t.md"}) == "snakemake out/t.md"
    assert rerun_command({"workdir": "/w d"}) == "cd '/w d' && snakemake results/tables.md"
    assert (
        rerun_command({"workdir": "/w", "snakefile": "/w/Snakefile"})
        == "cd /w && snakemake results/tables.md"
    )
    assert rerun_command({"snakefile": "/x/Snakefile"}) == "snakemake results/tables.md"  # no workdir
    assert (
        rerun_command({"workdir": "/w", "snakefile": "/s f/Snakefile"})
        == "cd /w && snakemake -s '/s f/Snakefile' results/tables.md"
    )
    assert (
        rerun_command({"configfiles": ["a.yaml", "my b.yaml"]})
        == "snakemake results/tables.md --configfile a.yaml 'my b.yaml'"
    )
    assert rerun_command({"configfiles": []}) == "snakemake results/tables.md"
    assert rerun_command({"configfiles": None}) == "snakemake results/tables.md"


# ------------------------------------------------------------------------------------ renderers
def demo_runs() -> dict[str, Run]:
    return {
        "base": Run("base", info(6, "post_ln"), {"status": "completed", "update": 1000},
                    scores(bleu=27.31, tok_bleu=28.0, ter=55.55, meteor=40.04, chrf=50.0), 61_000_000),
        "admin": Run("admin", info(12, "admin"), {"status": "completed", "update": 1000},
                     scores(bleu=27.73, tok_bleu=27.5, ter=54.0, meteor=41.0, chrf=51.0), 98_765_432),
        "deep": Run("deep", info(24, "post_ln"), {"status": "diverged", "update": 400, "epoch": 2,
                                                  "criterion": "blew_up", "reason": "nll 12"}, None, 150_000_000),
    }  # fmt: skip


def sig_file(tmp_path: Path, metric: str = "bleu", significant: bool = True) -> str:
    row = {"name": "admin", "p_value": 0.0123, "significant": significant, "better": True}
    path = tmp_path / f"sig_{metric}.json"
    data = {"alpha": 0.05, "n_samples": 100, "seed": 7, "vs_baseline": {metric: {"systems": [row]}}}
    path.write_text(json.dumps(data))
    return str(path)


SIG_NOTE = (
    "† {words} significantly different from 6L-6L Post-LN (paired bootstrap, 100 resamples, seed 7, "
    "p < 0.05). 12L-6L Admin: p = 0.0123 (better, significant)."
)
DIVERGED_NOTE = (
    "- 24L-6L Post-LN (`deep`): training diverged at update 400, epoch 2 (blew up after learning): nll 12"
)
ONE_SEED = (
    "Each row is one training run (seed 1): a difference between rows is not checked across seeds; the "
    "significance marks test the test set, not the training's variance."
)


def test_render_table1_every_line_of_a_small_table(tmp_path: Path):
    spec = {"split": "test", "tables": {"table1": {"baseline": "base", "rows": ["admin", "deep"]}}}
    lines = render_table1(spec, demo_runs(), Significance(sig_file(tmp_path)))
    assert lines == [
        "## Table 1",
        "",
        "| Model | #param | T↓ | M↑ | chrF2↑ | sacreBLEU↑ | Δ | BLEU↑ (tok) |",
        "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| 6L-6L Post-LN | 61.0M | 55.5 | 40.0 | 50.0 | 27.3 | – | 28.0 |",
        "| 12L-6L Admin | 98.8M | 54.0 | 41.0 | 51.0 | 27.7† | +0.4 | 27.5 |",
        "| 24L-6L Post-LN | 150M |  |  |  | diverged |  | diverged |",
        "",
        "T: TER, M: METEOR, chrF2: character n-gram F-score (β = 2), BLEU: sacreBLEU; Δ: BLEU difference "
        "against 6L-6L Post-LN. Split: test.",
        "",
        ONE_SEED,
        "",
        SIG_NOTE.format(words="sacreBLEU"),
        "",
        DIVERGED_NOTE,
        "",
        "Signatures:",
        "- sacreBLEU↑ `bleu-sig`",
        "- BLEU↑ `tok_bleu-sig`",
        "- TER↓ `ter-sig`",
        "- METEOR↑ `meteor-sig`",
        "- chrF2↑ `chrf-sig`",
        "",
    ]


def test_render_table1_on_tok_bleu_with_dev_ppl_paper_and_decoding_columns(tmp_path: Path):
    runs = demo_runs()
    runs["base"].info["decoding"] = {"beam": 4, "lenpen": 1.0}
    runs["admin"].info["decoding"] = {"beam": 5, "lenpen": 0.6}
    runs["base"].status["valid"] = {"ppl": 300.4}
    runs["deep"].status["valid"] = {"ppl": 610.6}
    runs["base"].train_points = [(2, 10.0), (4, 8.0), (6, 6.0), (8, 4.0), (10, 2.0)]
    paper = {
        "admin": {"tok_bleu": 27.25, "source": "P, Table 1"},
        "deep": {"diverged": True, "source": "P, Table 1"},
    }
    table = {"baseline": "base", "rows": ["admin", "deep"], "metric": "tok_bleu", "dev_ppl": True,
             "title": "Table 1: depth", "paper": paper}  # fmt: skip
    spec = {"split": "valid", "translation_floor": 0.5, "paper_tolerance": 0.2, "tables": {"table1": table}}
    lines = table1_section(spec, table, runs, sig_file(tmp_path, "tok_bleu"))
    assert lines[:9] == [
        "## Table 1: depth",
        "",
        "| Model | #param | Train ppl at 20/40/60/80/100% of its updates | Dev ppl↓ | T↓ | M↑ | chrF2↑ | BLEU↑ "
        "| Δ | sacreBLEU↑ | Paper BLEU | Δ paper | Beam / lenpen |",
        "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| 6L-6L Post-LN | 61.0M | 10 · 8 · 6 · 4 · 2 | 300 | 55.5 | 40.0 | 50.0 | 28.0 | – | 27.3 | – | – "
        "| 4 / 1.0 |",
        # 27.5 - 28.0 = -0.5; ours minus the paper's 27.25 = +0.25 -> +0.2
        "| 12L-6L Admin | 98.8M | – | – | 54.0 | 41.0 | 51.0 | 27.5† | -0.5 | 27.7 | 27.25 | +0.2 | 5 / 0.6 |",
        "| 24L-6L Post-LN | 150M | – | 611 |  |  |  | diverged |  | diverged | diverged | both diverged | – |",
        "",
        "T: TER, M: METEOR, chrF2: character n-gram F-score (β = 2), BLEU: tokenized BLEU as fairseq-generate "
        "--remove-bpe prints it (BLEU4: the model's own tokens against the binarized reference, unknown words "
        "as <<unk>>; no smoothing); Δ: BLEU difference against 6L-6L Post-LN. Split: valid. Train ppl: the "
        "training perplexity logged at 20%, 40%, ... of the run's updates (the curve itself is "
        "plots/learning_curves.png); dev ppl: perplexity on the development set at the last update.",
    ]
    assert lines[9:14] == ["", ONE_SEED, "", SIG_NOTE.format(words="tokenized BLEU"), ""]
    assert lines[14] == (
        "Paper: the published tokenized BLEU of each row; Δ paper = ours − paper. 1 of 2 compared rows are "
        "within ±0.2 tokenized BLEU of the paper (a run that diverged agrees with a paper row that diverged)."
    )  # |27.5 - 27.25| = 0.25 > 0.2 (the spec's tolerance); the diverged pair agrees
    assert lines[-8:] == [
        "",
        "Signatures:",
        "- BLEU↑ `tok_bleu-sig`",
        "- sacreBLEU↑ `bleu-sig`",
        "- TER↓ `ter-sig`",
        "- METEOR↑ `meteor-sig`",
        "- chrF2↑ `chrf-sig`",
        "",
    ]


def test_render_table1_floor_comes_from_the_spec(tmp_path: Path):
    runs = {n: r for n, r in demo_runs().items() if n != "deep"}
    table = {"baseline": "base", "rows": ["admin"]}
    spec = {"split": "test", "translation_floor": 27.5, "tables": {"table1": table}}
    text = "\n".join(table1_section(spec, table, runs, sig_file(tmp_path)))
    # the baseline's 27.31 is below 27.5: no marks at all
    assert "| 12L-6L Admin | 98.8M | 54.0 | 41.0 | 51.0 | 27.7 | +0.4 | 27.5 |" in text
    assert "No significance marks: the baseline 6L-6L Post-LN (sacreBLEU 27.3) is below the translation " \
           "floor of sacreBLEU 27.5: the paired bootstrap compares noise." in text  # fmt: skip


def test_render_comparison_every_line_of_a_small_table(tmp_path: Path):
    comp = {"name": "c", "title": "Table 2", "baseline": "base", "rows": ["admin", "deep"],
            "metrics": ["ter", "tok_bleu_retok"]}  # fmt: skip
    lines = render_comparison(comp, demo_runs(), Significance(sig_file(tmp_path)), None)
    assert lines == [
        "## Table 2",
        "",
        "| Model | Enc | Dec | Width | Residual | Init | BT | #param | Updates | TER↓ | sacreBLEU↑ | Δ |",
        "| :--- | ---: | ---: | :---: | :---: | :---: | :---: | ---: | ---: | ---: | ---: | ---: |",
        "| 6L-6L Post-LN | 6 | 6 |  | Post-LN | xavier | no | 61.0M | 1,000 | 55.5 | 27.3 | – |",
        "| 12L-6L Admin | 12 | 6 |  | Admin | xavier | no | 98.8M | 1,000 | 54.0 | 27.7† | +0.4 |",
        "| 24L-6L Post-LN | 24 | 6 |  | Post-LN | xavier | no | 150M | 400 | diverged | diverged | – |",
        "",
        "Δ: sacreBLEU↑ difference against 6L-6L Post-LN.",
        "",
        SIG_NOTE.format(words="sacreBLEU"),
        "",
        DIVERGED_NOTE,
        "",
        "Signatures:",
        "- TER↓ `ter-sig`",
        "- sacreBLEU↑ `bleu-sig`",
        "",
    ]


def test_render_comparison_architecture_columns_default_metrics_paper_and_first_row_baseline(tmp_path: Path):
    runs = {
        "w": Run("w", info(6, "pre_ln", width="256D", init="lipschitz", backtranslation=True,
                         decoder_residual="post_ln", label="Wide"), {"status": "completed", "update": 2500},
                 scores(bleu=30.0, tok_bleu=31.04, ter=50.0, meteor=45.0, chrf=60.0), 12_345),
        "n": Run("n", info(2, "admin", recipe={"lr": 0.001}), {"status": "completed"},
                 scores(bleu=29.0, tok_bleu=30.0, ter=51.0, meteor=44.0, chrf=59.0), None),
    }  # fmt: skip
    table = {
        "name": "arch",
        "rows": ["w", "n"],
        "metric": "tok_bleu",
        "paper": {"n": {"unreported": "later"}},
    }
    lines = comparison_section({"paper_tolerance": 1.0}, table, runs, None)
    assert lines[:7] == [
        "## arch",
        "",
        "| Model | Enc | Dec | Width | Residual | Init | BT | #param | Updates | BLEU↑ | sacreBLEU↑ | TER↓ "
        "| METEOR↑ | chrF2↑ | Δ | Paper BLEU | Δ paper | Differs in |",
        "| :--- | ---: | ---: | :---: | :---: | :---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: |",
        "| Wide | 6 | 6 | 256D | Pre-LN enc., Post-LN dec. | lipschitz | yes | 12K | 2,500 | 31.0 | 30.0 | 50.0 "
        "| 45.0 | 60.0 | – | – | – | lr default |",
        "| 2L-6L Admin | 2 | 6 |  | Admin | xavier | no | – | – | 30.0 | 29.0 | 51.0 | 44.0 | 59.0 | -1.0 | – "
        "| – | lr 0.001 |",
        "",
    ]
    assert lines[7] == "Δ: BLEU↑ difference against Wide."
    assert "Not in the paper: 2L-6L Admin: later." in lines


def test_render_comparison_drops_an_optional_metric_no_row_has_and_adds_the_tested_one():
    runs = {"a": run("a", scores(bleu=10.0, ter=80.0)), "b": run("b", scores(bleu=11.0, ter=79.0))}
    comp = {"name": "t", "rows": ["a", "b"], "metrics": ["tok_bleu", "ter"], "metric": "bleu"}
    lines = render_comparison(comp, runs, Significance(None))
    assert (
        lines[2]
        == "| Model | Enc | Dec | Width | Residual | Init | BT | #param | Updates | TER↓ | sacreBLEU↑ | Δ |"
    )
    assert lines[5] == "| 6L-6L Post-LN | 6 | 6 |  | Post-LN | xavier | no | – | – | 79.0 | 11.0 | +1.0 |"
    kept = {
        "a": run("a", scores(bleu=10.0, ter=80.0)),
        "b": run("b", scores(bleu=11.0, ter=79.0, tok_bleu=12.0)),
    }
    lines = render_comparison(comp, kept, Significance(None))
    assert (
        lines[2]
        == "| Model | Enc | Dec | Width | Residual | Init | BT | #param | Updates | BLEU↑ | TER↓ | sacreBLEU↑ | Δ |"
    )
    assert lines[4] == "| 6L-6L Post-LN | 6 | 6 |  | Post-LN | xavier | no | – | – | – | 80.0 | 10.0 | – |"


def matrix_json(tmp_path: Path) -> str:
    pairwise = {"systems": ["a6", "b12", "c24", "d48"], "scores": [41.04, 42.0, 0.5, 0.0], "alpha": 0.01,
                "signature": "sig",
                "matrix": [["", "-", "+", "+"], ["+", "", "+", "+"], ["-", "-", "", "="], ["-", "-", "=", ""]]}  # fmt: skip
    path = tmp_path / "table3.json"
    path.write_text(json.dumps({"n_samples": 250, "pairwise": {"tok_bleu": pairwise}}))
    return str(path)


def test_render_matrix_every_line_with_a_run_below_the_floor_and_a_diverged_one(tmp_path: Path):
    runs = {
        "a6": run("a6", scores(tok_bleu=41.04)),
        "b12": run("b12", scores(tok_bleu=42.0), info=info(12, "admin")),
        "c24": run("c24", scores(tok_bleu=0.5), info=info(24, "admin")),  # below the floor of 1.0
        "d48": run("d48", None, {"status": "diverged"}, info=info(48, "admin")),
    }
    lines = render_matrix("Table 3", matrix_json(tmp_path), runs)
    assert lines == [
        "## Table 3",
        "",
        "| Model | BLEU | a | b | c | d |",
        "| :--- | :---: | :---: | :---: | :---: | :---: |",
        "| a:6L-6L Post-LN | 41.0 |  | - | · | · |",
        "| b:12L-6L Admin | 42.0 | + |  | · | · |",
        "| c:24L-6L Admin | 0.5 | · | · |  | · |",
        "| d:48L-6L Admin | diverged | diverged | diverged | diverged |  |",
        "",
        "Cell (i, j): row i significantly better (+), worse (-) or not different (=) than column j (paired "
        "bootstrap, 250 resamples, p < 0.01); · = compared with a diverged run or one below the translation "
        "floor of tokenized BLEU 1.0 (no claim: the paired bootstrap compares noise there). `sig`",
        "",
    ]
    low = render_matrix("T", matrix_json(tmp_path), runs, floor_value=0.25)
    assert "| c:24L-6L Admin | 0.5 | - | - |  | · |" in low  # 0.5 clears a floor of 0.25
    assert any("below the translation floor of tokenized BLEU 0.2 (no claim" in line for line in low)


def test_matrix_section_needs_a_matrix_and_takes_title_floor_and_paper_from_the_config(tmp_path: Path):
    assert matrix_section({}, {"title": "X"}, {}, None) == []
    path = matrix_json(tmp_path)
    lines = matrix_section({}, {}, {}, path)
    assert lines[0] == "## Table 3"
    assert lines[4] == "| a:a6 | 41.0 |  | - | + | + |"  # runs unknown: names, no floor
    paper = {"matrix": [".-++", "+.++", "--.-", "--+."], "source": "S"}
    spec = {"translation_floor": 41.5}  # a6 (41.04) is below it
    lines = matrix_section(
        spec, {"title": "Pairs", "paper": paper}, {"a6": run("a6", scores(tok_bleu=41.04))}, path
    )
    assert lines[0] == "## Pairs"
    assert lines[4] == "| a:6L-6L Post-LN | 41.0 |  | · | · | · |"
    assert lines[7] == "| d:d48 | 0.0 | · | - | = [paper +] |  |"
    # claims on both sides: b-c, b-d, c-b, c-d, d-b, d-c; c-d and d-c differ from the paper
    assert lines[9] == (
        "Against the published matrix (S): 4 of 6 compared cells agree; where they differ, the paper's mark "
        "follows ours in brackets."
    )
    assert lines[10] == ""  # a blank line between the agreement sentence and the legend
    assert "floor of tokenized BLEU 41.5 (no claim" in lines[11]


def test_render_data_counts_shares_filters_and_warnings(tmp_path: Path):
    assert render_data({}) == []
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"splits": {"train": {"input": 1000, "kept": 875, "removed": {"length": 100,
                                                                                             "ratio": 25}}}}))  # fmt: skip
    bpe = tmp_path / "bpe.json"
    bpe.write_text(json.dumps({"stage": "apply-bpe", "splits": {"train": {"input": 2000, "kept": 2000,
                                                                          "warning": "odd"}}}))  # fmt: skip
    test = tmp_path / "test.json"
    test.write_text(json.dumps({"splits": {"test": {"input": 0, "kept": 0}}}))
    assert render_data({"wmt": [str(train), str(bpe)], "iwslt": str(test)}) == [
        "## Data",
        "",
        "| dataset | split | pairs in | kept | removed | by filter |",
        "| :--- | :--- | ---: | ---: | ---: | :--- |",
        "| wmt | train | 1,000 | 875 | 125 (12%) | length 100, ratio 25 |",  # 12.5% -> 12
        "| wmt | train (after BPE) | 2,000 | 2,000 | 0 (0%) | – |",
        "| iwslt | test | 0 | 0 | 0 | – |",
        "",
        "- **Warning** (wmt): odd.",
        "",
    ]
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert render_data({"none": str(empty)}) == [
        "## Data",
        "",
        "| dataset | split | pairs in | kept | removed | by filter |",
        "| :--- | :--- | ---: | ---: | ---: | :--- |",
        "",
    ]
    assert render_matrix("E", str(empty), {}) == ["## E", ""]  # no pairwise block
    assert render_data({"iwslt": str(test)}) == [
        "## Data",
        "",
        "| dataset | split | pairs in | kept | removed | by filter |",
        "| :--- | :--- | ---: | ---: | ---: | :--- |",
        "| iwslt | test | 0 | 0 | 0 | – |",
        "",
    ]


def test_render_reads_the_files_and_writes_header_tables_data_and_sources(tmp_path: Path):
    experiments = {}
    for name, enc, bleu in (("base", 6, 0.8), ("deep", 12, 21.55)):
        d = tmp_path / name
        d.mkdir()
        (d / "status.json").write_text(json.dumps({"status": "completed", "update": 10}))
        score = {"schema": "deepnmt-score/1", "scores": {"bleu": {"score": bleu, "signature": "s"}}}
        (d / "score.json").write_text(json.dumps(score))
        experiments[name] = {**info(enc, "post_ln"), "status": str(d / "status.json"),
                             "score": str(d / "score.json"), "train_log": str(d / "none.jsonl")}  # fmt: skip
    sig = tmp_path / "sig.json"
    row = {"name": "deep", "p_value": 0.001, "significant": True, "better": True}
    sig.write_text(json.dumps({"alpha": 0.05, "vs_baseline": {"bleu": {"systems": [row]}}}))
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"splits": {"test": {"input": 4, "kept": 3}}}))
    spec = {
        "split": "test",
        "experiments": experiments,
        "tables": {
            "comparisons": [{"name": "c", "title": "Depth", "rows": ["base", "deep"], "metrics": ["bleu"]}]
        },
        "configfiles": ["my.yaml"],
        "significance": {"c": str(sig)},
        "translation_floor": 0.5,  # the baseline's 0.8 clears it (not the default 1.0)
        "data": {"wmt": str(meta)},
    }
    text = render(spec)
    assert text.startswith(
        "# Results\n\nGenerated by `python -m pipeline_lib report` from the score files of the workflow (split: "
        "test). Do not edit: rerun `snakemake results/tables.md --configfile my.yaml`.\n\n## Depth\n\n"
    )
    # 21.55 - 0.8 = 20.75 -> +20.8 (20.75 is not exact in binary: above it)
    assert "| 12L-6L Post-LN | 12 | 6 |  | Post-LN | xavier | no | – | 10 | 21.6† | +20.8 |\n" in text
    assert (
        "\n## Data\n\n| dataset | split | pairs in | kept | removed | by filter |\n"
        "| :--- | :--- | ---: | ---: | ---: | :--- |\n| wmt | test | 4 | 3 | 1 (25%) | – |\n\n## Sources\n\n"
    ) in text
    assert text.endswith(
        f"\n\n## Sources\n\n- `base`: 6L-6L Post-LN: `{experiments['base']['score']}`, "
        f"`{experiments['base']['status']}`\n- `deep`: 12L-6L Post-LN: `{experiments['deep']['score']}`, "
        f"`{experiments['deep']['status']}`\n"
    )
    assert "\n\n\n" not in text
    bare = {k: v for k, v in spec.items() if k not in ("significance", "data")}  # both keys optional
    text = render(bare)
    assert "| 12L-6L Post-LN | 12 | 6 |  | Post-LN | xavier | no | – | 10 | 21.6 | +20.8 |\n" in text
    assert "## Data" not in text


def test_the_floor_is_judged_on_the_tested_bleu_not_sacrebleu(tmp_path: Path):
    """tok_bleu above the floor, sacreBLEU below it: the table translates and keeps its marks."""
    runs = {
        "base": run("base", scores(tok_bleu=28.0, bleu=0.5)),
        "admin": run("admin", scores(tok_bleu=27.5, bleu=0.4), info=info(12, "admin")),
    }
    table1 = {"baseline": "base", "rows": ["admin"], "metric": "tok_bleu"}
    spec = {"split": "test", "tables": {"table1": table1}}
    lines = table1_section(spec, table1, runs, sig_file(tmp_path, "tok_bleu"))
    assert lines[:3] == ["## Table 1", "", "| Model | #param | T↓ | M↑ | chrF2↑ | BLEU↑ | Δ | sacreBLEU↑ |"]
    assert lines[5] == "| 12L-6L Admin | – | – | – | – | 27.5† | -0.5 | 0.4 |"
    comp = {"name": "c", "baseline": "base", "rows": ["admin"], "metrics": ["bleu"], "metric": "tok_bleu"}
    lines = comparison_section(spec, comp, runs, sig_file(tmp_path, "tok_bleu"))
    assert lines[:3] == [
        "## c",
        "",
        "| Model | Enc | Dec | Width | Residual | Init | BT | #param | Updates | sacreBLEU↑ | BLEU↑ | Δ |",
    ]
    assert lines[5] == "| 12L-6L Admin | 12 | 6 |  | Admin | xavier | no | – | – | 0.4 | 27.5† | -0.5 |"
    # the spec's floor above the row's 27.5: no mark, and the row is named untested
    lines = comparison_section(
        {**spec, "translation_floor": 27.75}, comp, runs, sig_file(tmp_path, "tok_bleu")
    )
    assert lines[5] == "| 12L-6L Admin | 12 | 6 |  | Admin | xavier | no | – | – | 0.4 | 27.5 | -0.5 |"
    assert lines[9] == (
        "Not tested against 6L-6L Post-LN: 12L-6L Admin, below the translation floor of tokenized BLEU 27.8: "
        "the paired bootstrap compares noise."
    )


def test_a_compound_split_table_reads_the_papers_tok_bleu(tmp_path: Path):
    runs = {
        "base": run("base", scores(tok_bleu_wang=28.0)),
        "admin": run("admin", scores(tok_bleu_wang=27.5), info=info(12, "admin")),
    }
    paper = {"admin": {"tok_bleu": 27.0, "source": "W, Table 1"}}
    table1 = {"baseline": "base", "rows": ["admin"], "metric": "tok_bleu_wang", "paper": paper}
    lines = render_table1({"split": "test", "tables": {"table1": table1}}, runs, Significance(None))
    assert lines[2].endswith("| Δ | sacreBLEU↑ | Paper BLEU (DLCL eval, compound split) | Δ paper |")
    assert lines[5] == "| 12L-6L Admin | – | – | – | – | 27.5 | -0.5 | – | 27.0 | +0.5 |"
    comp = {"name": "c", "rows": ["base", "admin"], "metrics": ["tok_bleu_wang"], "metric": "tok_bleu_wang",
            "paper": paper}  # fmt: skip
    lines = render_comparison(comp, runs, Significance(None), {"paper_tolerance": 0.5})
    assert (
        lines[5] == "| 12L-6L Admin | 12 | 6 |  | Admin | xavier | no | – | – | 27.5 | -0.5 | 27.0 | +0.5 |"
    )
    assert lines[9] == (
        "Paper: the published tokenized BLEU (DLCL eval, compound split) of each row; Δ paper = ours − paper. "
        "1 of 1 compared rows are within ±0.5 tokenized BLEU (DLCL eval, compound split) of the paper (a run "
        "that diverged agrees with a paper row that diverged)."
    )
    lines = render_comparison(comp, runs, Significance(None), {"paper_tolerance": 0.25})
    assert "0 of 1 compared rows are within ±0.25 tokenized BLEU (DLCL eval" in lines[9]


def test_table1_puts_the_dagger_on_the_other_bleu_column_when_that_was_tested(tmp_path: Path):
    runs = {n: r for n, r in demo_runs().items() if n != "deep"}
    spec = {"split": "test", "tables": {"table1": {"baseline": "base", "rows": ["admin"]}}}
    lines = render_table1(spec, runs, Significance(sig_file(tmp_path, "tok_bleu"), "tok_bleu"))
    assert lines[5] == "| 12L-6L Admin | 98.8M | 54.0 | 41.0 | 51.0 | 27.7 | +0.4 | 27.5† |"


def test_a_diverged_row_has_no_decoding_cell_in_a_comparison():
    runs = {
        "a": run("a", scores(bleu=10.0), info=info(6, "post_ln", decoding={"beam": 4, "lenpen": 1.0})),
        "b": run(
            "b", scores(bleu=11.0), info=info(6, "admin", decoding={"sampling": True, "sampling_topk": 10})
        ),
        "c": run("c", None, {"status": "diverged", "update": 5}, info=info(9, "admin", decoding={"beam": 9})),
    }
    comp = {"name": "t", "rows": ["a", "b", "c"], "metrics": ["bleu"]}
    lines = render_comparison(comp, runs, Significance(None))
    assert lines[2].endswith("| sacreBLEU↑ | Δ | Beam / lenpen |")
    assert lines[4:7] == [
        "| 6L-6L Post-LN | 6 | 6 |  | Post-LN | xavier | no | – | – | 10.0 | – | 4 / 1.0 |",
        "| 6L-6L Admin | 6 | 6 |  | Admin | xavier | no | – | – | 11.0 | +1.0 | sampling (top-k 10) |",
        "| 9L-6L Admin | 9 | 6 |  | Admin | xavier | no | – | 5 | diverged | – | – |",
    ]


def test_table1_withholds_the_mark_of_a_row_below_the_floor_and_leads_with_perplexity(tmp_path: Path):
    runs = demo_runs()
    runs["base"] = Run("base", info(6, "post_ln"), {"status": "completed", "update": 1000},
                       scores(bleu=27.9, tok_bleu=28.0), 61_000_000)  # fmt: skip
    table = {"baseline": "base", "rows": ["admin"]}
    text = "\n".join(table1_section({"split": "test", "translation_floor": 27.8, "tables": {"table1": table}}, table, runs,
                                    sig_file(tmp_path)))  # fmt: skip
    assert "27.7†" not in text and "| 27.7 |" in text  # admin's 27.73 is below 27.8: no claim
    assert "Not tested against 6L-6L Post-LN: 12L-6L Admin, below the translation floor" in text
    low = "\n".join(
        table1_section(
            {"split": "test", "translation_floor": 99.0, "tables": {"table1": table}}, table, runs, None
        )
    )
    assert "**Read dev perplexity here.**" in low  # no system reaches 99


@pytest.mark.parametrize("n, text", [(1_050_000_000, "1.1B"), (101_500_000, "102M")])
def test_fmt_params_divides_by_exact_powers_of_ten(n: int, text: str):
    assert fmt_params(n) == text


def test_render_ignores_tables_that_are_not_rendered_and_ends_with_one_newline(tmp_path: Path):
    d = tmp_path / "base"
    d.mkdir()
    (d / "status.json").write_text(json.dumps({"status": "completed", "update": 10}))
    score = {"schema": "deepnmt-score/1", "scores": {"bleu": {"score": 20.0, "signature": "s"}}}
    (d / "score.json").write_text(json.dumps(score))
    experiments = {"base": {**info(6, "post_ln"), "status": str(d / "status.json"), "score": str(d / "score.json"),
                            "train_log": str(d / "none.jsonl")}}  # fmt: skip
    comparisons = [{"name": "c", "title": "Depth", "rows": ["base"], "metrics": ["bleu"]}]
    spec = {"split": "test", "experiments": experiments, "tables": {"comparisons": comparisons}}
    text = render(spec)
    with_analysis = render({**spec, "tables": {**spec["tables"], "analysis": ["base"]}})
    assert with_analysis == text and text.endswith("`\n") and not text.endswith("\n\n")
