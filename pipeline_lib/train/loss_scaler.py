"""fairseq's dynamic loss scaler, as the authors' fairseq ran it (``--fp16``).

LiyuanLucasLiu/Transformer-Clinic@70f72b7 fairseq/fairseq/optim/fp16_optimizer.py:13-54 (the class),
:182-198 (how ``--fp16-scale-window``, ``--fp16-scale-tolerance`` and ``--threshold-loss-scale`` reach
it), :130-147 (overflow detection from the gradient norm, and the stop at ``--min-loss-scale``);
defaults from fairseq/fairseq/options.py:184-193 (``--fp16-init-scale`` 2^7, tolerance 0,
``--min-loss-scale`` 1e-4, no threshold).

Semantics, per update attempt (``update_scale`` is called once per attempt, overflowed or not):

* overflow: count it; once the overflows since the last rescale reach ``tolerance`` of the attempts
  since then (always, at tolerance 0), halve the scale, but never below ``threshold``;
* no overflow: double the scale when the attempts since the last overflow are a multiple of
  ``scale_window`` (by default 2^14 / (world size x update freq), fp16_optimizer.py:188).

An overflowed update is skipped (no step, the update count and learning rate do not advance); when
the scale is then at or below ``min_loss_scale`` fairseq stops training ("Minimum loss scale reached").
With a threshold above the minimum, as Transformer-Clinic's scripts pass (0.03125), the minimum is
never reached: fairseq would skip every update from then on.
"""

from __future__ import annotations

import copy
import math
from typing import Any

FAIRSEQ_INIT_SCALE = 2.0**7
FAIRSEQ_MIN_LOSS_SCALE = 1e-4
FAIRSEQ_SCALE_WINDOW_UPDATES = 2**14  # divided by world size x update freq when no window is given


def default_scale_window(world_size: int, update_freq: int) -> float:
    """fairseq's window when ``--fp16-scale-window`` is not given (a float, as fairseq computes it)."""
    return FAIRSEQ_SCALE_WINDOW_UPDATES / world_size / update_freq


def has_overflow(grad_norm: float) -> bool:
    """fairseq's test: an infinite or NaN gradient norm."""
    return math.isinf(grad_norm) or math.isnan(grad_norm)


class DynamicLossScaler:
    def __init__(
        self,
        init_scale: float = FAIRSEQ_INIT_SCALE,
        scale_window: float = 2000,
        tolerance: float = 0.0,
        threshold: float | None = None,
        scale_factor: float = 2.0,
    ) -> None:
        if init_scale <= 0 or scale_window <= 0 or scale_factor <= 1 or not 0 <= tolerance <= 1:
            raise ValueError(
                f"loss scaler: init_scale {init_scale} and scale_window {scale_window} must be > 0, "
                f"scale_factor {scale_factor} > 1, tolerance {tolerance} in [0, 1]"
            )
        self.loss_scale = float(init_scale)
        self.scale_factor = scale_factor
        self.scale_window = scale_window
        self.tolerance = tolerance
        self.threshold = threshold
        self._iter = 0
        self._last_overflow_iter = -1
        self._last_rescale_iter = -1
        self._overflows_since_rescale = 0

    def update_scale(self, overflow: bool) -> None:
        iter_since_rescale = self._iter - self._last_rescale_iter
        if overflow:
            self._last_overflow_iter = self._iter
            self._overflows_since_rescale += 1
            if self._overflows_since_rescale / float(iter_since_rescale) >= self.tolerance:
                self._decrease()
                self._last_rescale_iter = self._iter
                self._overflows_since_rescale = 0
        elif (self._iter - self._last_overflow_iter) % self.scale_window == 0:
            self.loss_scale *= self.scale_factor
            self._last_rescale_iter = self._iter
        self._iter += 1

    def scale_after_clean_update(self) -> float:
        """The scale the next attempt uses if the one being judged does not overflow (--deferred-stats
        queues the next backward before it knows)."""
        ahead = copy.copy(self)
        ahead.update_scale(False)
        return ahead.loss_scale

    def _decrease(self) -> None:
        self.loss_scale /= self.scale_factor
        if self.threshold is not None:
            self.loss_scale = max(self.loss_scale, self.threshold)

    def at_floor(self) -> bool:
        """The scale cannot fall further: it sits at ``threshold``."""
        return self.threshold is not None and self.loss_scale <= self.threshold

    # fairseq checkpoints only ``loss_scale``; the counters too make a resumed run continue exactly.
    def state_dict(self) -> dict[str, Any]:
        return {
            "loss_scale": self.loss_scale,
            "iter": self._iter,
            "last_overflow_iter": self._last_overflow_iter,
            "last_rescale_iter": self._last_rescale_iter,
            "overflows_since_rescale": self._overflows_since_rescale,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loss_scale = float(state["loss_scale"])
        self._iter = int(state.get("iter", 0))
        self._last_overflow_iter = int(state.get("last_overflow_iter", -1))
        self._last_rescale_iter = int(state.get("last_rescale_iter", -1))
        self._overflows_since_rescale = int(state.get("overflows_since_rescale", 0))
