"""The stability map reads the trainer's verdicts: per cell the converged fraction over seeds, each
seed's dev perplexity, the clause that fired for a diverged seed, and every run's final loss."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_lib.report.stability import read_grid, render_markdown, stability_map


def fake_run(tmp_path: Path, name: str, status: dict, final_nll: float) -> dict[str, str]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "status.json").write_text(json.dumps(status))
    records = [
        {"kind": "start", "update": 0},
        {"kind": "train", "epoch": 1, "update": 300, "nll_loss": final_nll},
    ]
    (folder / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {"status": str(folder / "status.json"), "train_log": str(folder / "train_log.jsonl")}


def spec(tmp_path: Path) -> dict:
    runs = {}
    outcomes = {
        ("post_ln", 1): (
            {"status": "diverged", "criterion": "stuck", "update": 200, "valid": {"ppl": 610.0}},
            9.3,
        ),
        ("post_ln", 2): ({"status": "completed", "update": 300, "valid": {"ppl": 420.0}}, 8.6),
        ("admin", 1): ({"status": "completed", "update": 300, "valid": {"ppl": 300.0}}, 8.1),
        ("admin", 2): ({"status": "completed", "update": 300, "valid": {"ppl": 310.0}}, 8.2),
    }
    for (method, seed), (status, nll) in outcomes.items():
        name = f"stability-{method}-6L6L-lr0.002-b0.98-s{seed}"
        runs[name] = {"method": method, "depth": "6-6", "lr": 0.002, "beta2": 0.98, "seed": seed,
                      **fake_run(tmp_path, name, status, nll)}  # fmt: skip
    return {
        "runs": runs, "methods": ["post_ln", "admin"], "depths": ["6-6"], "lrs": [0.002], "betas2": [0.98],
        "max_update": 300, "setup": "64D models.", "rule": {"text": "the rule", "threshold_bits": 9.146},
    }  # fmt: skip


def test_cells_count_converged_seeds_and_name_the_clause(tmp_path: Path):
    stab = spec(tmp_path)
    grid = read_grid(stab)
    assert [s.seed for s in grid[("post_ln", "6-6", 0.002, 0.98)]] == [1, 2]
    text = render_markdown(stab, grid)
    assert "## Post-LN, 6L-6L: 1 of 2 runs converged" in text
    assert "| 0.002 | **1/2**: stuck at the threshold at 200 (610), 420 |" in text
    assert "| 0.002 | 2/2: 300, 310 |" in text
    # final losses, sorted, diverged in bold
    assert "| Post-LN | 8.60 **9.30** |" in text
    assert "| Admin | 8.10 8.20 |" in text
    assert "the rule" in text and "BLEU is not reported" in text


def test_the_map_writes_a_png_and_the_table(tmp_path: Path):
    stab = spec(tmp_path)
    png, md = tmp_path / "map.png", tmp_path / "map.md"
    stability_map({"stability": stab}, str(png), str(md))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert md.read_text().startswith("# Stability map")


def test_the_published_count_stands_beside_the_maps_own(tmp_path: Path):
    stab = spec(tmp_path)
    stab["paper"] = {"post_ln": {"diverged": 7, "of": 15, "source": "Liu et al. 2020a (Admin), Figure 10"}}
    text = render_markdown(stab, read_grid(stab))
    # 15 - 7 = 8 converged in the paper; Admin has no published count: its heading stays as it was
    assert (
        "## Post-LN, 6L-6L: 1 of 2 runs converged (paper: 8 of 15, Liu et al. 2020a (Admin), Figure 10)"
        in text
    )
    assert "## Admin, 6L-6L: 2 of 2 runs converged\n" in text
