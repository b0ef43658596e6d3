"""When a run counts as diverged: a non-finite loss or gradient, an fp16 loss scale that collapsed,
or a mean training nll over a window of updates after warm-up above a threshold.

The threshold's "failed to train" reference is the entropy of a unigram model of the training targets.

A Transformer that cannot beat a context-free unigram guess after warm-up has not learned to use the
source or the prefix. That is how a too-deep post-LN model fails at a high learning rate (it stalls at
unigram level rather than producing NaNs), and what the papers report as "diverged".
"""

from __future__ import annotations

import collections
import math

import numpy as np

from pipeline_lib.data.indexed import IndexedDataset
from pipeline_lib.train.config import UNIGRAM

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


class DivergenceMonitor:
    """Checks every update; keeps the window of recent training nll (bits), which checkpoints carry."""

    def __init__(self, setting: float | str | None, window: int, warmup_updates: int, fp16: bool) -> None:
        self.setting = setting
        self.warmup_updates = warmup_updates
        self.fp16 = fp16
        self.recent_nll: collections.deque[float] = collections.deque(maxlen=window)
        self.threshold = math.nan  # nll bits/token; set by set_threshold from the config and the data

    def set_threshold(self, vocab_size: int, targets: IndexedDataset, tgt_vocab_size: int, eos: int) -> float:
        if self.setting is None:
            self.threshold = math.log2(vocab_size)  # worse than a uniform guess
        elif self.setting != UNIGRAM:
            self.threshold = float(self.setting)
        else:
            self.threshold = unigram_entropy_bits(targets, tgt_vocab_size, eos)
        return self.threshold

    def restore(self, recent_nll: list[float]) -> None:
        self.recent_nll.clear()
        self.recent_nll.extend(float(x) for x in recent_nll)

    def check(
        self, num_updates: int, loss_bits: float, nll_bits: float, gnorm: float, loss_scale: float | None
    ) -> str | None:
        """The reason the run diverged at this update, or None."""
        if self.fp16:
            if loss_scale is not None and loss_scale < MIN_LOSS_SCALE:
                return f"fp16 loss scale fell below {MIN_LOSS_SCALE} (gradients keep overflowing)"
            if not math.isfinite(gnorm):
                return None  # an overflow the scaler has just handled
        if not math.isfinite(loss_bits):
            return f"non-finite loss ({loss_bits})"
        if not math.isfinite(gnorm):
            return f"non-finite gradient norm ({gnorm})"
        # The nll, not the label-smoothed loss: the threshold is a cross-entropy of the data. The mean
        # over the window, not every update: a stalled run hovers around the threshold, noisily.
        if num_updates >= self.warmup_updates:
            self.recent_nll.append(nll_bits)
            window = self.recent_nll
            mean = sum(window) / len(window)
            if len(window) == window.maxlen and mean > self.threshold:
                what = "the unigram entropy " if self.setting == UNIGRAM else ""
                return (
                    f"mean training nll {mean:.3f} bits/token over the last {len(window)} updates, "
                    f"above {what}{self.threshold:.3f}"
                )
        return None
