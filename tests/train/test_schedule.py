"""The schedules after warm-up: inverse_sqrt decays, fixed holds the peak, linear (Transformer-Clinic's,
the Admin paper's Figure 10 runs) decays to 0 at max_update; all share fairseq's linear warm-up."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline_lib.train.schedule import LrSchedule


def schedule(decay: str, warmup: int, max_update: int = 0) -> LrSchedule:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    return LrSchedule(opt, 1e-3, warmup, 1e-7, decay=decay, max_update=max_update)


def test_fixed_holds_the_peak_from_update_one_without_warmup():
    s = schedule("fixed", 0)
    assert [s.lr_at(n) for n in (0, 1, 100, 10_000)] == [1e-3] * 4
    assert s.optimizer.param_groups[0]["lr"] == 1e-3


def test_inverse_sqrt_without_warmup_decays_from_update_one():
    s = schedule("inverse_sqrt", 0)
    assert s.lr_at(1) == 1e-3 and s.lr_at(100) == pytest.approx(1e-4)


@pytest.mark.parametrize("decay", ["fixed", "inverse_sqrt", "linear"])
def test_both_share_the_linear_warmup(decay: str):
    s = schedule(decay, 100, max_update=1000)
    assert s.lr_at(0) == 1e-7 and s.lr_at(50) == pytest.approx(1e-7 + 50 * (1e-3 - 1e-7) / 100)
    after = s.lr_at(400)
    expected = {"fixed": 1e-3, "inverse_sqrt": 1e-3 * math.sqrt(100 / 400), "linear": 1e-3 * (1 - 300 / 900)}
    assert after == pytest.approx(expected[decay])


def test_linear_as_figure_10_runs_it_warmup_1_from_1e_7_then_down_to_0():
    # TC iwslt14_de-en.md:182-183 (--warmup-updates 1 --warmup-init-lr 1e-7 --max-update 100000) through
    # radam_fairseq/linear_schedule.py:74-77 with min_lr 0: update 1 at 1e-7, update 2 at the peak,
    # then (1 - (n - 1) / 99999) of it; lr_at(n) is the rate of update n + 1.
    s = schedule("linear", 1, max_update=100_000)
    assert s.optimizer.param_groups[0]["lr"] == 1e-7
    assert s.lr_at(1) == 1e-3
    assert s.lr_at(50_000) == pytest.approx(1e-3 * (1 - 49_999 / 99_999))
    assert s.lr_at(99_999) == pytest.approx(1e-3 / 99_999)
    assert s.lr_at(100_000) == 0.0
    assert s.step_update(100_001) == 0.0  # never negative (TC's --min-lr default -1 would be)


def test_linear_without_warmup_starts_at_the_peak():
    s = schedule("linear", 0, max_update=10)
    assert [s.lr_at(n) for n in (0, 5, 10)] == pytest.approx([1e-3, 5e-4, 0.0])


def test_linear_needs_a_budget_past_the_warmup():
    with pytest.raises(ValueError, match="max_update > warmup_updates"):
        schedule("linear", 100, max_update=100)
    with pytest.raises(ValueError, match="max_update > warmup_updates"):
        schedule("linear", 0)


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="unknown lr schedule"):
        schedule("cosine", 0)
