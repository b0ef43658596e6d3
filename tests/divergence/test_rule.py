"""The divergence rule on loss curves shaped like real ones: each clause fires where it should, and a
run that learns, however slowly, completes."""

from __future__ import annotations

import math

import pytest

from pipeline_lib.divergence.rule import LEARNED_MARGIN_BITS, MIN_FINAL_UPDATES, DivergenceMonitor

THRESHOLD = 9.0  # bits/token, e.g. a unigram entropy
UNIFORM = 12.3  # log2 of a 5k vocabulary


def monitor(window: int = 50, after: int = 200, setting: float | None = THRESHOLD) -> DivergenceMonitor:
    m = DivergenceMonitor(setting, window, after, fp16=False)
    m.threshold, m.uniform = THRESHOLD, UNIFORM
    return m


def run(m: DivergenceMonitor, nll: list[float]):
    """(update at which the run stopped, verdict or None), as the trainer drives the monitor."""
    for done, value in enumerate(nll):
        verdict = m.check(done, value, value, 1.0, None)
        if verdict is not None:
            return done + 1, verdict
    return len(nll), m.final_check(len(nll))


def decay(start: float, floor: float, scale: float, n: int, offset: int = 0) -> list[float]:
    return [floor + (start - floor) * math.exp(-(i + offset) / scale) for i in range(n)]


def test_a_nan_run_is_non_finite_at_once():
    update, verdict = run(monitor(), [12.0, 11.0, math.nan, 8.0])
    assert update == 3 and verdict.criterion == "non_finite"


def test_a_run_that_blows_up_after_learning():
    # Learns to 6 bits, then the loss jumps back above the threshold (and below uniform).
    curve = decay(12.0, 6.0, 30, 300) + [10.5] * 300
    update, verdict = run(monitor(window=50), curve)
    assert verdict is not None and verdict.criterion == "blew_up", verdict
    assert 300 < update <= 350  # within one window of the jump
    assert "after going below" in verdict.reason


def test_a_slow_but_healthy_run_converges():
    # Sits above the threshold for 150 updates (window means up to ~10.5 bits), then learns: slow, not
    # diverged. The old "mean over a window after warm-up" rule called it diverged at update 50.
    curve = decay(12.0, 4.0, 300, 1000)
    assert sum(curve[100:150]) / 50 > THRESHOLD
    assert run(monitor(window=50, after=200), curve)[1] is None


def test_a_run_stuck_at_unigram_is_stuck_at_divergence_after():
    # Falls fast to the unigram plateau and hovers there with noise: never learned.
    curve = [max(v, THRESHOLD + 0.05 * math.sin(i)) for i, v in enumerate(decay(12.0, 8.0, 20, 600))]
    update, verdict = run(monitor(window=50, after=200), curve)
    assert verdict is not None and verdict.criterion == "stuck" and update == 200, (update, verdict)


def test_hovering_just_below_the_threshold_is_not_learning_and_then_not_a_blow_up():
    """Within the margin a run has not learned: crossing back is 'stuck' (after N), never 'blew_up'."""
    curve = [THRESHOLD - LEARNED_MARGIN_BITS / 2] * 100 + [THRESHOLD + 0.1] * 300
    update, verdict = run(monitor(window=50, after=300), curve)
    assert verdict.criterion == "stuck" and update == 300


def test_worse_than_uniform_once_a_window_has_passed():
    update, verdict = run(monitor(window=50), [20.0] * 100)
    assert verdict.criterion == "worse_than_uniform" and update == 50


@pytest.mark.parametrize("length", [MIN_FINAL_UPDATES, 60])
def test_a_short_run_gets_the_same_clauses_on_its_partial_window(length: int):
    _, verdict = run(monitor(window=1000), [20.0] * length)
    assert verdict is not None and verdict.criterion == "worse_than_uniform"


def test_a_short_run_above_the_threshold_is_not_stuck_before_divergence_after():
    assert run(monitor(window=1000, after=500), [10.0] * 60)[1] is None


def test_too_short_to_judge():
    assert run(monitor(window=1000), [20.0] * (MIN_FINAL_UPDATES - 1))[1] is None


def test_the_state_carries_learned_across_a_resume():
    first = monitor(window=50)
    run(first, decay(12.0, 6.0, 30, 300))
    resumed = monitor(window=50)
    resumed.restore(first.state())
    update, verdict = run(resumed, [10.5] * 100)
    assert verdict.criterion == "blew_up" and update < 50  # the restored window was full


def test_the_demo_rule_on_real_curves():
    """Curves logged by the demo's stability map (tests/fixtures/divergence_curves.json), replayed at the
    demo recipe's settings: a post-LN run stuck at the unigram level is stuck at update 400; a post-LN
    run that sat on the plateau until ~update 300 and then learned (slow, healthy) and a pre-LN run
    complete; an Admin run that left the plateau only at ~400 completes, by a hair (docs/demo.md,
    "The divergence rule")."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parents[1] / "fixtures" / "divergence_curves.json").read_text())
    expected = {
        "stability-post_ln-6L6L-lr0.002-b0.98-s1": ("stuck", 400),
        "stability-post_ln-6L6L-lr0.001-b0.98-s1": (None, 500),
        "stability-pre_ln-6L6L-lr0.001-b0.98-s1": (None, 500),
        "stability-admin-6L6L-lr0.002-b0.999-s2": (None, 500),
    }
    for name, (criterion, stop) in expected.items():
        run_data = data["runs"][name]
        m = DivergenceMonitor("unigram", data["window"], data["after"], fp16=False)
        m.threshold, m.uniform = data["threshold_bits"], UNIFORM
        curve = [v for v in run_data["nll_per_10_updates"] for _ in range(10)]  # each record: 10 updates
        if run_data["status"] == "diverged":  # the updates after the last record were not logged:
            curve += [curve[-1]] * (run_data["update"] - len(curve))  # continue at the last value
        update, verdict = run(m, curve)
        assert (verdict.criterion if verdict else None, update) == (criterion, stop), name
        assert run_data["criterion"] == criterion  # the trainer said the same


def test_the_stated_rule_names_the_loss_scale_clause_of_the_precision_mode() -> None:
    from pipeline_lib.divergence.rule import FLOOR_OVERFLOW_UPDATES, describe_rule

    assert "loss scale" not in describe_rule(None, 100, 200)
    assert "loss scale below 0.0001" in describe_rule(None, 100, 200, "fp16")
    fairseq = describe_rule(None, 100, 200, "fairseq_fp16")
    assert (
        "Minimum loss scale reached" in fairseq and f"{FLOOR_OVERFLOW_UPDATES} overflows in a row" in fairseq
    )
