"""The divergence rule on hand-made loss curves: each criterion fires where it should, and a run that
learns completes."""

from __future__ import annotations

import math

import pytest

from pipeline_lib.train.divergence import MIN_FINAL_UPDATES, DivergenceMonitor

THRESHOLD = 9.0  # bits/token, e.g. a unigram entropy


def monitor(window: int = 50, warmup: int = 10) -> DivergenceMonitor:
    m = DivergenceMonitor(THRESHOLD, window, warmup, fp16=False)
    m.threshold = THRESHOLD
    return m


def run(m: DivergenceMonitor, nll: list[float]):
    for update, value in enumerate(nll):
        verdict = m.check(update, value, value, 1.0, None)
        if verdict is not None:
            return update, verdict
    return len(nll), m.final_check()


def test_nan_fires_at_once():
    update, verdict = run(monitor(), [12.0, 11.0, math.nan, 8.0])
    assert update == 2 and verdict.criterion == "non_finite"


def test_a_run_stuck_above_the_threshold_fails_when_the_window_fills():
    update, verdict = run(monitor(window=50, warmup=10), [9.5] * 200)
    assert verdict.criterion == "window" and update == 10 + 50 - 1


def test_a_run_that_blows_up_after_learning_fails():
    curve = [12.0 - 0.1 * i for i in range(60)] + [15.0] * 100
    _, verdict = run(monitor(window=50), curve)
    assert verdict is not None and verdict.criterion == "window"


def test_a_run_that_learns_within_the_window_completes():
    curve = [12.0 * math.exp(-i / 20) + 4.0 for i in range(400)]  # below 9 bits after ~18 updates
    assert run(monitor(window=100, warmup=20), curve)[1] is None


@pytest.mark.parametrize("length", [MIN_FINAL_UPDATES, 60])
def test_a_short_run_above_the_threshold_fails_the_final_check(length: int):
    _, verdict = run(monitor(window=1000, warmup=5), [20.0] * length)
    assert verdict is not None and verdict.criterion == "final"


def test_a_short_run_below_the_threshold_completes():
    assert run(monitor(window=1000, warmup=5), [5.0] * 60)[1] is None


def test_too_short_to_judge():
    assert run(monitor(window=1000, warmup=0), [20.0] * (MIN_FINAL_UPDATES - 1))[1] is None


def test_warmup_longer_than_the_run_still_gets_a_verdict():
    _, verdict = run(monitor(window=1000, warmup=500), [20.0] * 60)
    assert verdict is not None and verdict.criterion == "final"


def test_no_final_verdict_without_an_explicit_threshold():
    """The default threshold (log2 vocab) is where training starts: a short run still learning passes."""
    m = DivergenceMonitor(None, 1000, 5, fp16=False)
    m.threshold = THRESHOLD
    assert run(m, [20.0] * 60)[1] is None
