"""Diverged runs' placeholder outputs (pipeline_lib/divergence/placeholders.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_lib.divergence import placeholders as diverged
from pipeline_lib.errors import InputError


def test_placeholders_only_for_diverged_runs(tmp_path: Path):
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"status": "completed", "update": 10}))
    assert not diverged.skip_diverged(status, score=tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()
    status.write_text(json.dumps({"status": "diverged", "update": 3, "epoch": 1, "reason": "nan"}))
    assert diverged.skip_diverged(
        status, checkpoint=tmp_path / "avg.pt", text=[tmp_path / "h.txt"], lines=4,
        score=tmp_path / "s.json", system="x",
    )  # fmt: skip
    assert (tmp_path / "h.txt").read_text() == "\n" * 4
    score = json.loads((tmp_path / "s.json").read_text())
    assert score["status"] == "diverged" and score["scores"] == {} and score["schema"] == "deepnmt-score/1"
    assert json.loads((tmp_path / "avg.pt").read_text())["status"] == "diverged"


def test_bad_status_names_the_file(tmp_path: Path):
    bad = tmp_path / "status.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"status.json:1"):
        diverged.is_diverged(bad)
