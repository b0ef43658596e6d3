"""Reading a training log (pipeline_lib/report/inputs.py): per-epoch and per-interval perplexity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_lib.report.inputs import read_train_log


def test_train_log_per_epoch_perplexity(tmp_path: Path):
    log = tmp_path / "train_log.jsonl"
    records = [
        {"kind": "start", "update": 0, "parameters": 1234},
        {"kind": "train", "epoch": 1, "update": 2, "nll_loss": 2.0, "tokens_per_update": 100},
        {"kind": "train", "epoch": 1, "update": 3, "nll_loss": 5.0, "tokens_per_update": 100},
        {"kind": "valid", "epoch": 1, "update": 3, "ppl": 9.5},
        {"kind": "train", "epoch": 2, "update": 4, "nll_loss": 1.0, "tokens_per_update": 50},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"kind": "tra')  # a cut last line
    out = read_train_log(log)
    assert out.parameters == 1234
    assert out.train_ppl[1] == pytest.approx(2 ** ((2.0 * 200 + 5.0 * 100) / 300))
    assert out.train_ppl[2] == pytest.approx(2.0)
    assert out.valid_ppl == {1: 9.5}
    # the interval records themselves, for curves over updates
    assert out.train_points == [(2, 4.0), (3, 32.0), (4, 2.0)]
    assert out.valid_points == [(3, 9.5)] and out.epoch_ends == {1: 3, 2: 4}
