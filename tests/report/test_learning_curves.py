"""The learning-curve figure (pipeline_lib/report/learning_curves.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_learning_curves_plot_every_interval_record_over_updates(tmp_path: Path, monkeypatch):
    """An update-limited run (one epoch, many log intervals) is a curve, not one dot per epoch."""
    from pipeline_lib.report import learning_curves as curves

    log = tmp_path / "train_log.jsonl"
    records = [{"kind": "start", "update": 0, "parameters": 10}]
    records += [{"kind": "train", "epoch": 1, "update": u, "nll_loss": 8.0 - u / 10, "tokens_per_update": 100}
                for u in range(10, 160, 10)]  # fmt: skip
    records += [{"kind": "valid", "epoch": 1, "update": 150, "ppl": 40.0}]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"status": "completed", "update": 150, "epoch": 1}))
    info = {"train_log": str(log), "status": str(status), "score": "", "encoder_layers": 2, "decoder_layers": 2,
            "residual": "pre_ln", "width": "base", "d_model": 64}  # fmt: skip
    figures = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: figures.append(fig))
    curves.learning_curves({"experiments": {"run": info}}, str(tmp_path / "lc.png"))
    train_ax, valid_ax = figures[0].axes[:2]
    assert train_ax.get_xlabel() == "update" == valid_ax.get_xlabel()
    curve = train_ax.lines[0]
    assert list(curve.get_xdata()) == list(range(10, 160, 10))
    assert curve.get_ydata()[0] == pytest.approx(2**7.0)
    assert list(train_ax.lines[1].get_xdata()) == [150]  # the end of epoch 1, marked


def test_an_experiment_keeps_its_colour_across_reruns_and_reorderings():
    from pipeline_lib.report.learning_curves import stable_colors

    first = stable_colors(["post_ln_18", "admin_18", "pre_ln_18"])
    assert len(set(first.values())) == 3
    assert stable_colors(["pre_ln_18", "post_ln_18", "admin_18"]) == first  # the spec's order is no input
    # a run listed before the others (a new table, a new first experiment) moves nobody's colour,
    # unless it takes a slot another one wanted, and then only that one
    more = stable_colors(["aaa_new", "post_ln_18", "admin_18", "pre_ln_18"])
    assert sum(more[n] != c for n, c in first.items()) <= 1
    assert len(set(stable_colors([f"e{i}" for i in range(15)]).values())) == 15
