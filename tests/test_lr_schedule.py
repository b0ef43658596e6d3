"""The two schedules after warm-up: inverse_sqrt decays, fixed holds the peak (Figure 10's no-warm-up
runs use it), and both share fairseq's linear warm-up."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline_lib.train.schedule import LrSchedule


def schedule(decay: str, warmup: int) -> LrSchedule:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    return LrSchedule(opt, 1e-3, warmup, 1e-7, decay=decay)


def test_fixed_holds_the_peak_from_update_one_without_warmup():
    s = schedule("fixed", 0)
    assert [s.lr_at(n) for n in (0, 1, 100, 10_000)] == [1e-3] * 4
    assert s.optimizer.param_groups[0]["lr"] == 1e-3


def test_inverse_sqrt_without_warmup_decays_from_update_one():
    s = schedule("inverse_sqrt", 0)
    assert s.lr_at(1) == 1e-3 and s.lr_at(100) == pytest.approx(1e-4)


@pytest.mark.parametrize("decay", ["fixed", "inverse_sqrt"])
def test_both_share_the_linear_warmup(decay: str):
    s = schedule(decay, 100)
    assert s.lr_at(0) == 1e-7 and s.lr_at(50) == pytest.approx(1e-7 + 50 * (1e-3 - 1e-7) / 100)
    after = s.lr_at(400)
    assert after == (1e-3 if decay == "fixed" else pytest.approx(1e-3 * math.sqrt(100 / 400)))


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="unknown lr schedule"):
        schedule("cosine", 0)
