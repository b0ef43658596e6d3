"""Mutation gaps of marks (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test.

Every expected text and number below is written out by hand: the floor's words and lead note, the
no-marks sentences, the significance footnote and its "Not tested against" sentence. Runs are built
in memory (``Run`` with a ``label`` so that ``model_label`` returns it verbatim); significance JSON is
written to ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_lib.report.inputs import Run
from pipeline_lib.report.marks import DEFAULT_FLOOR, Floor, Significance, paper_entries, table_metric


def run(name: str, scores: dict[str, float] | None = None, diverged: bool = False) -> Run:
    status = {"status": "diverged" if diverged else "completed", "update": 10}
    score = None
    if scores is not None:
        score = {"scores": {m: {"score": v, "signature": m} for m, v in scores.items()}}
    return Run(name, {"label": f"Label {name}"}, status, score)


def sig_json(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "sig.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def row(name: str, p: float, better: bool, significant: bool) -> dict:
    return {"name": name, "p_value": p, "better": better, "significant": significant}


# ---------------------------------------------------------------- paper_entries, table_metric
def test_paper_entries_leaves_a_non_compound_split_metric_alone():
    entries = {"a": {"tok_bleu": 30.0, "source": "T1"}}
    assert paper_entries(entries, "bleu") == {"a": {"tok_bleu": 30.0, "source": "T1"}}
    assert paper_entries(entries, "tok_bleu") == {"a": {"tok_bleu": 30.0, "source": "T1"}}
    assert paper_entries(None, "tok_bleu_t2t") is None
    assert paper_entries({}, "tok_bleu_wang") == {}


def test_paper_entries_copies_tok_bleu_to_a_compound_split_metric_and_an_own_value_wins():
    entries = {
        "a": {"tok_bleu": 27.5, "source": "T1"},
        "b": {"tok_bleu": 28.0, "tok_bleu_wang": 29.1},
        "c": {"bleu": 20.0, "unreported": True},
    }
    assert paper_entries(entries, "tok_bleu_wang") == {
        "a": {"tok_bleu_wang": 27.5, "tok_bleu": 27.5, "source": "T1"},
        "b": {"tok_bleu_wang": 29.1, "tok_bleu": 28.0},
        "c": {"bleu": 20.0, "unreported": True},
    }
    assert paper_entries({"a": {"tok_bleu": 26.0}}, "tok_bleu_t2t") == {
        "a": {"tok_bleu_t2t": 26.0, "tok_bleu": 26.0}
    }


def test_table_metric_defaults_to_sacrebleu():
    assert table_metric({"metric": "tok_bleu"}) == "tok_bleu"
    assert table_metric({"metric": "chrf"}) == "chrf"
    assert table_metric({}) == "bleu"
    assert table_metric({"metric": None}) == "bleu"
    assert table_metric({"metric": ""}) == "bleu"


# ---------------------------------------------------------------- Floor
def test_floor_defaults_and_metric_fallback():
    assert DEFAULT_FLOOR == 1.0
    floor = Floor()
    assert (floor.value, floor.metric) == (1.0, "bleu")
    assert Floor(2.5, "chrf").metric == "bleu"
    assert Floor(2.5, "ter").metric == "bleu"
    assert Floor(2.5, "meteor").metric == "bleu"
    assert Floor(2.5, "tok_bleu").metric == "tok_bleu"
    assert Floor(2.5, "tok_bleu_wang").metric == "tok_bleu_wang"
    assert Floor(2.5, "tok_bleu_t2t").metric == "tok_bleu_t2t"
    assert Floor(2.5, "tok_bleu_retok").metric == "tok_bleu_retok"
    assert Floor(2.5, "chrf").value == 2.5


def test_floor_score_reads_its_own_metric():
    r = run("a", {"bleu": 3.0, "tok_bleu": 0.5, "chrf": 40.0})
    assert Floor(1.0, "tok_bleu").score(r) == 0.5
    assert Floor(1.0, "chrf").score(r) == 3.0  # judged by sacreBLEU
    assert Floor(1.0, "tok_bleu").below(r) is True
    assert Floor(1.0, "chrf").below(r) is False
    assert Floor(1.0, "tok_bleu_wang").score(r) is None


def test_floor_boundary_diverged_and_missing_scores():
    floor = Floor(1.0)
    assert floor.below(run("a", {"bleu": 0.99})) is True
    assert floor.below(run("a", {"bleu": 1.0})) is False  # equal to the floor: not below
    assert floor.below(run("a", {"bleu": 1.01})) is False
    assert floor.below(run("a", {"bleu": 0.0})) is True
    assert floor.below(run("a", {"bleu": 0.0}, diverged=True)) is False  # diverged: never "below"
    assert floor.below(run("a", None)) is False
    assert floor.below(run("a", {"tok_bleu": 0.0})) is False  # no score of its metric
    assert Floor(0.0).below(run("a", {"bleu": 0.0})) is False
    assert Floor(5.0).below(run("a", {"bleu": 4.9})) is True


def test_floor_all_below():
    floor = Floor(1.0)
    below, above, diverged = run("b", {"bleu": 0.2}), run("t", {"bleu": 5.0}), run("d", diverged=True)
    assert floor.all_below([]) is False
    assert floor.all_below([below]) is True
    assert floor.all_below([diverged]) is True
    assert floor.all_below([diverged, below]) is True
    assert floor.all_below([below, diverged]) is True
    assert floor.all_below([diverged, above]) is False
    assert floor.all_below([below, above]) is False
    assert floor.all_below([run("e", {"bleu": 1.0}), below]) is False


def test_floor_words_and_lead_note():
    assert Floor().words == "the translation floor of sacreBLEU 1.0"
    assert Floor(12.34, "tok_bleu").words == "the translation floor of tokenized BLEU 12.3"
    assert Floor(2.5, "chrf").words == "the translation floor of sacreBLEU 2.5"
    assert Floor(0.5, "tok_bleu_wang").words == (
        "the translation floor of tokenized BLEU (DLCL eval, compound split) 0.5"
    )
    assert Floor(2.0, "tok_bleu").lead_note() == (
        "**Read dev perplexity here.** No system of this table reaches the translation floor of "
        "tokenized BLEU 2.0: none translates yet, so its BLEU differences are noise; BLEU is shown for "
        "completeness and no significance is claimed."
    )


# ---------------------------------------------------------------- Significance: reading, against
def test_significance_without_a_file():
    s = Significance(None)
    assert s.metric == "bleu"
    assert (s.rows, s.data, s.no_marks, s.floor, s.below) == ({}, None, None, None, {})
    assert s.note([run("a", {"bleu": 30.0})], "Base") is None
    assert s.mark("a") == ""
    assert Significance(None, "tok_bleu").metric == "tok_bleu"


def test_significance_reads_only_its_metrics_block(tmp_path: Path):
    data = {
        "alpha": 0.05,
        "vs_baseline": {
            "bleu": {"systems": [row("a", 0.2, True, False)]},
            "tok_bleu": {"systems": [row("a", 0.001, True, True), row("b", 0.3, False, False)]},
        },
    }
    path = sig_json(tmp_path, data)
    tok = Significance(path, "tok_bleu")
    assert tok.metric == "tok_bleu"
    assert tok.data == data
    assert tok.rows == {"a": row("a", 0.001, True, True), "b": row("b", 0.3, False, False)}
    assert tok.mark("a") == "†" and tok.mark("b") == "" and tok.mark("zzz") == ""
    bleu = Significance(path)
    assert bleu.rows == {"a": row("a", 0.2, True, False)}
    assert bleu.mark("a") == ""
    assert Significance(path, "chrf").rows == {}
    assert Significance(sig_json(tmp_path, {"seed": 1}), "bleu").rows == {}  # no vs_baseline at all
    assert Significance(sig_json(tmp_path, {"vs_baseline": {"bleu": {}}}), "bleu").rows == {}


def test_against_a_diverged_baseline_has_no_marks(tmp_path: Path):
    path = sig_json(tmp_path, {"vs_baseline": {"bleu": {"systems": [row("a", 0.001, True, True)]}}})
    s = Significance(path).against(run("base", diverged=True), [run("a", {"bleu": 30.0})], Floor())
    assert s.no_marks == "No significance marks: the baseline Label base diverged."
    assert s.mark("a") == ""
    assert s.note([run("a", {"bleu": 30.0})], "Label base") == (
        "No significance marks: the baseline Label base diverged."
    )
    # without a floor too
    s = Significance(path).against(run("base", diverged=True))
    assert s.no_marks == "No significance marks: the baseline Label base diverged."
    assert s.below == {}


def test_against_a_baseline_below_the_floor_has_no_marks(tmp_path: Path):
    path = sig_json(tmp_path, {"vs_baseline": {"tok_bleu": {"systems": [row("a", 0.001, True, True)]}}})
    base = run("base", {"tok_bleu": 0.45, "bleu": 3.0})
    s = Significance(path, "tok_bleu").against(
        base, [base, run("a", {"tok_bleu": 30.0})], Floor(1.0, "tok_bleu")
    )
    expected = (
        "No significance marks: the baseline Label base (tokenized BLEU 0.5) is below the translation "
        "floor of tokenized BLEU 1.0: the paired bootstrap compares noise."
    )
    assert s.no_marks == expected
    assert s.mark("a") == ""
    assert s.note([run("a", {"tok_bleu": 30.0})], "Label base") == expected
    # a baseline exactly at the floor is not below it
    at = Significance(path, "tok_bleu").against(run("base", {"tok_bleu": 1.0}), None, Floor(1.0, "tok_bleu"))
    assert at.no_marks is None
    assert at.mark("a") == "†"


def test_against_carries_data_rows_floor_and_metric(tmp_path: Path):
    data = {
        "n_samples": 1000,
        "seed": 12345,
        "vs_baseline": {"tok_bleu": {"systems": [row("a", 0.0123, True, True)]}},
    }
    sig = Significance(sig_json(tmp_path, data), "tok_bleu")
    floor = Floor(1.0, "tok_bleu")
    out = sig.against(run("base", {"tok_bleu": 20.0}), [run("a", {"tok_bleu": 30.0})], floor)
    assert out is not sig
    assert out.metric == "tok_bleu"
    assert out.data == data
    assert out.rows == {"a": row("a", 0.0123, True, True)}
    assert out.floor is floor
    assert out.no_marks is None
    assert out.below == {}
    assert out.mark("a") == "†"
    assert out.note([run("a", {"tok_bleu": 30.0})], "Base X") == (
        "† tokenized BLEU significantly different from Base X (paired bootstrap, 1000 resamples, seed "
        "12345, p < 0.05). Label a: p = 0.0123 (better, significant)."
    )
    # no floor: nobody is below, nothing withheld
    bare = sig.against(run("base", {"tok_bleu": 0.0}))
    assert (bare.no_marks, bare.below, bare.floor) == (None, {}, None)
    assert bare.mark("a") == "†"


def test_against_lists_the_systems_below_the_floor(tmp_path: Path):
    path = sig_json(
        tmp_path,
        {"vs_baseline": {"bleu": {"systems": [row("lo", 0.001, False, True), row("hi", 0.001, True, True)]}}},
    )
    runs = [
        run("lo", {"bleu": 0.3}),
        run("hi", {"bleu": 25.0}),
        run("eq", {"bleu": 1.0}),
        run("dv", diverged=True),
    ]
    s = Significance(path).against(run("base", {"bleu": 20.0}), runs, Floor())
    assert s.below == {"lo": "Label lo"}
    assert s.mark("lo") == ""  # significant, but below the floor
    assert s.mark("hi") == "†"
    none_given = Significance(path).against(run("base", {"bleu": 20.0}), None, Floor())
    assert none_given.below == {}
    assert none_given.mark("lo") == "†"


# ---------------------------------------------------------------- Significance.note
def test_note_full_text_skips_diverged_and_absent_rows(tmp_path: Path):
    data = {
        "alpha": 0.01,
        "n_samples": 1000,
        "seed": 12345,
        "vs_baseline": {
            "bleu": {
                "systems": [
                    row("a", 0.0123, True, True),
                    row("b", 0.45678, False, False),
                    row("c", 0.002, False, True),
                    row("d", 0.3, True, False),
                    row("dv", 0.001, True, True),
                ]
            }
        },
    }
    s = Significance(sig_json(tmp_path, data))
    runs = [
        run("a", {"bleu": 30.0}),
        run("absent", {"bleu": 30.0}),
        run("b", {"bleu": 20.0}),
        run("dv", diverged=True),
        run("c", {"bleu": 10.0}),
        run("d", {"bleu": 22.0}),
    ]
    assert s.note(runs, "Base") == (
        "† sacreBLEU significantly different from Base (paired bootstrap, 1000 resamples, seed 12345, "
        "p < 0.01). Label a: p = 0.0123 (better, significant); Label b: p = 0.4568 (worse, not "
        "significant); Label c: p = 0.0020 (worse, significant); Label d: p = 0.3000 (better, not "
        "significant)."
    )
    assert s.mark("dv") == "†"  # mark() reads the row; the table withholds a diverged row elsewhere


def test_note_alpha_defaults_to_0_05_and_missing_fields_print_none(tmp_path: Path):
    data = {"vs_baseline": {"bleu": {"systems": [row("a", 0.5, False, False)]}}}
    s = Significance(sig_json(tmp_path, data))
    assert s.note([run("a", {"bleu": 1.5})], "B") == (
        "† sacreBLEU significantly different from B (paired bootstrap, None resamples, seed None, "
        "p < 0.05). Label a: p = 0.5000 (worse, not significant)."
    )


def test_note_is_none_when_nothing_is_said(tmp_path: Path):
    data = {"n_samples": 10, "seed": 1, "vs_baseline": {"bleu": {"systems": [row("dv", 0.001, True, True)]}}}
    s = Significance(sig_json(tmp_path, data))
    assert s.note([], "B") is None
    assert s.note([run("dv", diverged=True), run("other", {"bleu": 3.0})], "B") is None
    # a row below the floor with no floor to name: nothing said either
    s.below = {"dv": "Label dv"}
    assert s.note([run("dv", {"bleu": 0.1})], "B") is None


def test_note_not_tested_sentence(tmp_path: Path):
    data = {
        "alpha": 0.05,
        "n_samples": 200,
        "seed": 7,
        "vs_baseline": {
            "bleu": {
                "systems": [
                    row("lo1", 0.001, False, True),
                    row("hi", 0.04, True, True),
                    row("lo2", 0.9, False, False),
                ]
            }
        },
    }
    path = sig_json(tmp_path, data)
    runs = [
        run("lo1", {"bleu": 0.2}),
        run("hi", {"bleu": 25.0}),
        run("lo2", {"bleu": 0.0}),
        run("x", {"bleu": 0.1}),
    ]
    s = Significance(path).against(run("base", {"bleu": 20.0}), runs, Floor(1.0))
    assert s.below == {"lo1": "Label lo1", "lo2": "Label lo2", "x": "Label x"}
    assert s.note(runs, "Base") == (
        "† sacreBLEU significantly different from Base (paired bootstrap, 200 resamples, seed 7, "
        "p < 0.05). Label hi: p = 0.0400 (better, significant). Not tested against Base: Label lo1, "
        "Label lo2, below the translation floor of sacreBLEU 1.0: the paired bootstrap compares noise."
    )
    only_below = [r for r in runs if r.name != "hi"]
    assert s.note(only_below, "Base") == (
        "Not tested against Base: Label lo1, Label lo2, below the translation floor of sacreBLEU 1.0: "
        "the paired bootstrap compares noise."
    )
