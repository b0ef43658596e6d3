"""Comparison tables (pipeline_lib/report/tables.py): significance marks and diverged baselines."""

from __future__ import annotations

import json
from pathlib import Path


def test_no_significance_marks_against_a_diverged_baseline(tmp_path: Path):
    from pipeline_lib.report.inputs import Run
    from pipeline_lib.report.tables import DAGGER, Significance, render_comparison

    sig_path = tmp_path / "sig.json"
    row = {"name": "b", "p_value": 0.001, "significant": True, "better": True}
    sig_path.write_text(json.dumps({"alpha": 0.05, "vs_baseline": {"bleu": {"systems": [row]}}}))
    info = {"encoder_layers": 6, "decoder_layers": 6, "residual": "admin"}
    score = {
        "scores": {"bleu": {"score": 1.0, "signature": "s"}, "tok_bleu": {"score": 1.2, "signature": "t"}}
    }
    trained = Run("b", info, {"status": "completed"}, score)
    comp = {"name": "c", "title": "T", "baseline": "a", "rows": ["a", "b"], "metrics": ["bleu"]}
    for base_status, expect_mark in (("completed", True), ("diverged", False)):
        base = Run("a", info, {"status": base_status}, score)
        text = "\n".join(render_comparison(comp, {"a": base, "b": trained}, Significance(str(sig_path))))
        assert (DAGGER in text) is expect_mark, text
        assert ("No significance marks" in text) is not expect_mark
