"""When a run counts as diverged, and which criterion said so (recorded in ``status.json``):

* ``non_finite``: a non-finite loss or gradient norm, checked on every update;
* ``loss_scale``: fp16's loss scale collapsed (gradients keep overflowing);
* ``window``: the mean training nll over the last ``divergence_window`` updates after warm-up is
  above the threshold;
* ``final``: at the end of a run too short to fill the window, the mean over the updates it has
  (after warm-up if any, else all) is above the threshold. Runs of fewer than
  ``MIN_FINAL_UPDATES`` updates are too short to tell a slow start from a failure and get no verdict,
  and so are runs without an explicit threshold: the default, log2(vocab), is where a freshly
  initialised model starts, so a short run that is still learning would fail it.

The threshold's "failed to train" reference is the entropy of a unigram model of the training targets.

A Transformer that cannot beat a context-free unigram guess after warm-up has not learned to use the
source or the prefix. That is how a too-deep post-LN model fails at a high learning rate (it stalls at
unigram level rather than producing NaNs), and what the papers report as "diverged".
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

from pipeline_lib.data.indexed import IndexedDataset
from pipeline_lib.train.config import UNIGRAM

MIN_FINAL_UPDATES = 20
MIN_LOSS_SCALE = 1e-4  # fp16: below this the run is declared diverged (fairseq's --min-loss-scale)


def unigram_entropy_bits(targets: IndexedDataset, vocab_size: int, eos: int) -> float:
    """Cross-entropy (bits/token) of the maximum-likelihood unigram model on its own training targets.

    Counts every target token and one ``</s>`` per sentence, as the trainer's loss does.
    """
    counts = np.bincount(np.asarray(targets.ids), minlength=vocab_size).astype(np.float64)
    counts[eos] += len(targets)
    total = counts.sum()
    if total == 0:
        return math.log2(vocab_size)
    p = counts[counts > 0] / total
    return float(-(p * np.log2(p)).sum())


@dataclass(frozen=True)
class Verdict:
    criterion: str  # non_finite | loss_scale | window | final
    reason: str


class DivergenceMonitor:
    """Checks every update; keeps the window of recent training nll (bits), which checkpoints carry."""

    def __init__(self, setting: float | str | None, window: int, warmup_updates: int, fp16: bool) -> None:
        self.setting = setting
        self.warmup_updates = warmup_updates
        self.fp16 = fp16
        self.recent_nll: collections.deque[float] = collections.deque(maxlen=window)  # after warm-up
        self.tail_nll: collections.deque[float] = collections.deque(maxlen=window)  # every update
        self.threshold = math.nan  # nll bits/token; set by set_threshold from the config and the data

    def set_threshold(self, vocab_size: int, targets: IndexedDataset, tgt_vocab_size: int, eos: int) -> float:
        if self.setting is None:
            self.threshold = math.log2(vocab_size)  # worse than a uniform guess
        elif self.setting != UNIGRAM:
            self.threshold = float(self.setting)
        else:
            self.threshold = unigram_entropy_bits(targets, tgt_vocab_size, eos)
        return self.threshold

    def state(self) -> dict[str, list[float]]:
        return {"recent_nll": list(self.recent_nll), "tail_nll": list(self.tail_nll)}

    def restore(self, state: dict[str, list[float]]) -> None:
        for name in ("recent_nll", "tail_nll"):
            window = getattr(self, name)
            window.clear()
            window.extend(float(x) for x in state.get(name, []))

    def check(
        self, num_updates: int, loss_bits: float, nll_bits: float, gnorm: float, loss_scale: float | None
    ) -> Verdict | None:
        """The verdict if the run diverged at this update, else None."""
        if self.fp16:
            if loss_scale is not None and loss_scale < MIN_LOSS_SCALE:
                return Verdict(
                    "loss_scale", f"fp16 loss scale fell below {MIN_LOSS_SCALE} (gradients keep overflowing)"
                )
            if not math.isfinite(gnorm):
                return None  # an overflow the scaler has just handled
        if not math.isfinite(loss_bits):
            return Verdict("non_finite", f"non-finite loss ({loss_bits})")
        if not math.isfinite(gnorm):
            return Verdict("non_finite", f"non-finite gradient norm ({gnorm})")
        self.tail_nll.append(nll_bits)
        # The nll, not the label-smoothed loss: the threshold is a cross-entropy of the data. The mean
        # over the window, not every update: a stalled run hovers around the threshold, noisily.
        if num_updates >= self.warmup_updates:
            self.recent_nll.append(nll_bits)
            window = self.recent_nll
            if len(window) == window.maxlen:
                return self._above(window, "window", f"over the last {len(window)} updates")
        return None

    def final_check(self) -> Verdict | None:
        """At the end of training: the run must have learned, even if it never filled the window."""
        window = self.recent_nll if self.recent_nll else self.tail_nll
        if self.setting is None or len(self.tail_nll) < MIN_FINAL_UPDATES or len(window) == window.maxlen:
            return None  # too short to judge, or the window check has judged every update already
        return self._above(window, "final", f"over its last {len(window)} updates, at the end of training")

    def _above(self, window: collections.deque[float], criterion: str, where: str) -> Verdict | None:
        mean = sum(window) / len(window)
        if mean <= self.threshold:
            return None
        what = "the unigram entropy " if self.setting == UNIGRAM else ""
        return Verdict(
            criterion, f"mean training nll {mean:.3f} bits/token {where}, above {what}{self.threshold:.3f}"
        )
