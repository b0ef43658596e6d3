"""fairseq's dynamic loss scaler: scale sequences worked out by hand from TC@70f72b7
fairseq/fairseq/optim/fp16_optimizer.py:29-47 (and, under ``make test-peers``, against fairseq's own
class in tests/export/test_fairseq_trajectory.py)."""

from __future__ import annotations

import pytest

from pipeline_lib.train.loss_scaler import DynamicLossScaler, default_scale_window


def scales(scaler: DynamicLossScaler, overflows: str) -> list[float]:
    """The scale after each attempt; ``overflows`` is a string of '.' (fine) and 'x' (overflow)."""
    out = []
    for c in overflows:
        scaler.update_scale(c == "x")
        out.append(scaler.loss_scale)
    return out


def test_the_scale_doubles_every_window_of_clean_updates() -> None:
    # attempts 0..: doubles when (iter - last_overflow(-1)) % 4 == 0, i.e. after attempts 3 and 7
    assert scales(DynamicLossScaler(128, scale_window=4), "........") == [128] * 3 + [256] * 4 + [512]


def test_an_overflow_halves_it_and_restarts_the_window() -> None:
    # overflow at attempt 2 -> 64; the window then counts from attempt 2: doubles at 6 (6 - 2 = 4)
    got = scales(DynamicLossScaler(128, scale_window=4), "..x.......")
    assert got == [128, 128, 64, 64, 64, 64, 128, 128, 128, 128]


def test_the_threshold_is_a_floor() -> None:
    got = scales(DynamicLossScaler(1.0, scale_window=1000, threshold=0.25), "xxxxx")
    assert got == [0.5, 0.25, 0.25, 0.25, 0.25]


def test_tolerance_lowers_the_scale_only_past_a_fraction_of_overflows() -> None:
    # tolerance 0.5: at attempt 3 one overflow in 4 attempts since the rescale (-1) is 25%: kept;
    # at attempt 4 two in five, 40%: kept; at 5, three in six, 50%: halved
    got = scales(DynamicLossScaler(8.0, scale_window=1000, tolerance=0.5), "...xxx")
    assert got == [8.0, 8.0, 8.0, 8.0, 8.0, 4.0]


def test_fairseqs_default_window_divides_by_gpus_and_update_freq() -> None:
    assert default_scale_window(1, 1) == 16384
    assert default_scale_window(16, 8) == 128.0
    assert default_scale_window(3, 1) == pytest.approx(5461.333, abs=1e-3)  # a float, as fairseq's


def test_state_round_trip_continues_the_same_sequence() -> None:
    a = DynamicLossScaler(128, scale_window=3)
    scales(a, "..x.")
    b = DynamicLossScaler(1, scale_window=3)
    b.load_state_dict(a.state_dict())
    assert scales(a, "......x..") == scales(b, "......x..")
    assert b.at_floor() is False


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="scale_window"):
        DynamicLossScaler(128, scale_window=0)


def test_the_scale_after_a_clean_update_is_predicted_without_changing_the_scaler() -> None:
    # --deferred-stats queues the next backward before the pending attempt is judged
    scaler = DynamicLossScaler(128, scale_window=4, tolerance=0.5)
    for c in "..x.x.....":
        state = scaler.state_dict()
        predicted = scaler.scale_after_clean_update()
        assert scaler.state_dict() == state
        scaler.update_scale(False)
        assert scaler.loss_scale == predicted
        scaler.load_state_dict(state)
        scaler.update_scale(c == "x")
