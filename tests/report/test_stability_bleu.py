"""Admin Figure 10's stability map (pipeline_lib/report/stability.py): each decoded cell's BLEU next
to the convergence verdict."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_lib.report.stability import read_grid, render_markdown


def _run(tmp_path: Path, name: str, status: dict, score: dict | None) -> dict:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "status.json").write_text(json.dumps(status))
    run = {"status": str(folder / "status.json"), "train_log": str(folder / "missing.jsonl")}
    if score is not None:
        (folder / "test.score.json").write_text(json.dumps(score))
        run["score"] = str(folder / "test.score.json")
    return run


def test_the_map_shows_each_decoded_cells_bleu_beside_its_verdict(tmp_path: Path):
    ok = {"status": "completed", "update": 100000, "valid": {"ppl": 5.1}}
    bad = {"status": "diverged", "criterion": "stuck", "update": 8000, "valid": {"ppl": 900.0}}
    scores = {"tok_bleu": {"score": 35.125}, "bleu": {"score": 33.0}}
    runs = {
        "pre": {"method": "pre_ln", **_run(tmp_path, "pre", ok, {"scores": scores})},
        # a diverged run's score file is the placeholder: no scores
        "post": {"method": "post_ln", **_run(tmp_path, "post", bad, {"scores": {}})},
    }
    for run in runs.values():
        run.update(depth="6-6", lr=3e-4, beta2=0.995, seed=1111)
    stab = {"runs": runs, "methods": ["post_ln", "pre_ln"], "depths": ["6-6"], "lrs": [3e-4],
            "betas2": [0.995], "max_update": 100000, "setup": "", "rule": {"text": "r"}}  # fmt: skip
    grid = read_grid(stab)
    assert grid[("pre_ln", "6-6", 3e-4, 0.995)][0].bleu == 35.125  # tokenized BLEU, not sacreBLEU
    assert grid[("post_ln", "6-6", 3e-4, 0.995)][0].bleu is None
    text = render_markdown(stab, grid)
    assert "| 0.0003 | 1/1: 5, BLEU 35.12 |" in text
    assert "| 0.0003 | **0/1**: stuck at the threshold at 8000 (900) |" in text
    assert "BLEU is not reported" not in text and "test BLEU" in text
