"""Table 1 in the demo's form: each model's training curve and dev perplexity beside BLEU, the
diverging clause of a stopped run, and how many seeds stand behind the rows."""

from __future__ import annotations

from pipeline_lib.report.inputs import Run
from pipeline_lib.report.tables import Significance, curve_cell, render_table1


def info(layers: int, residual: str, seed: int = 1) -> dict:
    return {"encoder_layers": layers, "decoder_layers": 6, "residual": residual, "width": "64D", "seed": seed}


def score(bleu: float) -> dict:
    return {
        "scores": {m: {"score": bleu, "signature": f"{m}-sig"} for m in ("tok_bleu", "bleu", "ter", "meteor")}
    }


def test_the_curve_cell_reads_each_fifth_of_the_run():
    points = [(u, 1000.0 - u) for u in range(10, 510, 10)]
    assert curve_cell(points) == "900 · 800 · 700 · 600 · 500"
    assert curve_cell([]) == "–"


def test_table1_shows_curves_dev_perplexity_the_clause_and_one_seed():
    curve = [(u, 2000.0 / (1 + u / 100)) for u in range(10, 510, 10)]
    flat = [(u, 600.0) for u in range(10, 410, 10)]
    runs = {
        "base": Run("base", info(6, "post_ln"), {"status": "completed", "valid": {"ppl": 300.4}}, score(1.0),
                    1_000_000, curve),
        "deep": Run("deep", info(12, "post_ln"),
                    {"status": "diverged", "criterion": "stuck", "update": 400, "epoch": 1,
                     "reason": "mean training nll 9.26", "valid": {"ppl": 610.0}}, score(0.0), 1_500_000, flat),
    }  # fmt: skip
    spec = {"split": "test", "tables": {"table1": {"baseline": "base", "rows": ["deep"], "metric": "tok_bleu",
                                                  "dev_ppl": True}}}  # fmt: skip
    text = "\n".join(render_table1(spec, runs, Significance(None, "tok_bleu")))
    assert "Train ppl at 20/40/60/80/100% of its updates | Dev ppl↓" in text
    assert "| 6L-6L-64D Post-LN | 1.0M | 1000 · 667 · 500 · 400 · 333 | 300 |" in text
    assert "| 12L-6L-64D Post-LN | 1.5M | 600 · 600 · 600 · 600 · 600 | 610 | " in text
    assert "training diverged at update 400, epoch 1 (stuck at the threshold)" in text
    assert "Each row is one training run (seed 1)" in text


def test_without_dev_ppl_the_paper_shape_stays():
    runs = {"base": Run("base", info(6, "post_ln"), {"status": "completed"}, score(1.0))}
    spec = {"split": "test", "tables": {"table1": {"baseline": "base", "rows": []}}}
    text = "\n".join(render_table1(spec, runs, Significance(None)))
    assert "Dev ppl" not in text and "| Model | #param | T↓ |" in text


def test_table1_shows_chrf_and_names_the_settings_a_row_was_trained_with_where_rows_differ():
    base_score = {"scores": {**score(20.0)["scores"], "chrf": {"score": 51.25, "signature": "chrF2-sig"}}}
    recipe = {"lr": 0.0007, "warmup_updates": 4000, "dropout": 0.1}
    runs = {
        "base": Run("base", {**info(6, "post_ln"), "recipe": recipe}, {"status": "completed"}, base_score),
        "hot": Run("hot", {**info(6, "admin"), "recipe": {**recipe, "lr": 0.002}}, {"status": "completed"},
                   base_score),
    }  # fmt: skip
    spec = {"split": "test", "tables": {"table1": {"baseline": "base", "rows": ["hot"]}}}
    text = "\n".join(render_table1(spec, runs, Significance(None)))
    assert "| T↓ | M↑ | chrF2↑ |" in text and "| 51.2 |" in text
    header = next(line for line in text.splitlines() if line.startswith("| Model"))
    assert header.endswith("| Differs in |")
    assert "| lr 0.0007 |" in text and "| lr 0.002 |" in text  # only the key that differs
    same = {n: Run(n, {**r.info, "recipe": recipe}, r.status, r.score) for n, r in runs.items()}
    assert "Differs in" not in "\n".join(render_table1(spec, same, Significance(None)))
