"""When a run counts as diverged, and which clause said so (recorded in ``status.json``).

The reference is the threshold: by default log2(vocab), a uniform guess; with ``unigram``, the entropy
of a unigram model of the training targets, i.e. "not better than a random model" in the Admin paper's
words: a Transformer that cannot beat a context-free unigram guess has not learned to use the source or
the prefix. Every clause but the first two looks at the mean training nll over the last
``divergence_window`` updates (the mean, not single updates: a stalled run hovers around the
threshold, noisily). The clauses:

* ``non_finite``: a non-finite loss or gradient norm, checked on every update;
* ``loss_scale``: fp16's loss scale collapsed (gradients keep overflowing): with ``--amp fp16`` it
  fell below :data:`MIN_LOSS_SCALE`; with ``fairseq_fp16`` an overflow left it at or below
  ``--min-loss-scale``, where fairseq stops ("Minimum loss scale reached"), or it sits at its
  ``--threshold-loss-scale`` floor and :data:`FLOOR_OVERFLOW_UPDATES` updates in a row overflowed:
  fairseq would skip every update from there to the end of its budget, with the same weights;
* ``blew_up``: the run had learned (its window mean went :data:`LEARNED_MARGIN_BITS` below the
  threshold) and climbed back to or above it;
* ``stuck``: at update ``divergence_after`` or later, the window mean is still at or above the
  threshold. A run that is merely slow passes until then: the clause measures "never learned in the
  time a healthy run needs", and the time is a recipe setting justified from curves (see the configs);
* ``worse_than_uniform``: the window mean is more than :data:`UNIFORM_MARGIN_BITS` above log2(vocab),
  worse than guessing uniformly; a fresh model starts within a fraction of a bit of it and a run that
  is learning only goes down from there.

At the end of a run, the same clauses are applied to the last window even if it is not full (runs of
fewer than :data:`MIN_FINAL_UPDATES` updates get no verdict); ``stuck`` needs ``divergence_after``
updates, so a run stopped earlier is never called stuck.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from pipeline_lib.data.indexed import IndexedDataset


class LossScale(Protocol):
    """What the rule reads of fairseq's scaler (pipeline_lib/train/loss_scaler.py)."""

    loss_scale: float

    def at_floor(self) -> bool: ...


UNIGRAM = "unigram"  # --divergence-threshold unigram: the training targets' unigram entropy
MIN_FINAL_UPDATES = 20
MIN_LOSS_SCALE = 1e-4  # fp16: below this the run is declared diverged (fairseq's --min-loss-scale)
# fairseq_fp16 with a --threshold-loss-scale floor: gradients that overflow this many updates in a row at
# the floor (1/32 in the authors' scripts, 2^12 below fairseq's initial scale) will not recover; fairseq
# would go on skipping every update to the end of its budget without changing a weight.
FLOOR_OVERFLOW_UPDATES = 100
# How far below the threshold a window mean must go to count as learned: a run hovering at the
# threshold is stuck, not a run that learned and blew up (window means of a stalled run move by a
# few hundredths of a bit).
LEARNED_MARGIN_BITS = 0.25
UNIFORM_MARGIN_BITS = 1.0

# Every clause a verdict can name (``status.json``'s ``criterion``), with the words tables and the
# stability map print for it.
CLAUSE_WORDS = {
    "non_finite": "non-finite loss",
    "loss_scale": "fp16 loss scale collapsed",
    "blew_up": "blew up after learning",
    "stuck": "stuck at the threshold",
    "worse_than_uniform": "worse than uniform",
}


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


def describe_rule(setting: float | str | None, window: int, after: int, amp: str = "none") -> str:
    """The rule in words, for tables and the stability map (which must state the same rule)."""
    threshold = {None: "log2(vocab)", UNIGRAM: "the unigram entropy of the training targets"}.get(
        setting if setting is None or setting == UNIGRAM else "", f"{setting} bits/token"
    )
    return (
        f"a non-finite loss; or a mean training nll over {window} updates that is still at or above "
        f"{threshold} at update {after} or later (stuck), that is back at or above it after having gone "
        f"{LEARNED_MARGIN_BITS:g} bits below (blew up), or that is more than {UNIFORM_MARGIN_BITS:g} bit above log2(vocab) (worse than uniform)"
        + _loss_scale_clause(amp)
    )


def _loss_scale_clause(amp: str) -> str:
    if amp == "fairseq_fp16":
        return (
            "; or, in fp16, an overflow that leaves the loss scale at --min-loss-scale (fairseq's 'Minimum "
            f"loss scale reached') or {FLOOR_OVERFLOW_UPDATES} overflows in a row at its --threshold-loss-scale floor"
        )
    if amp == "fp16":
        return f"; or, in fp16, a loss scale below {MIN_LOSS_SCALE:g}"
    return ""


@dataclass(frozen=True)
class Verdict:
    criterion: str  # a key of CLAUSE_WORDS
    reason: str


class DivergenceMonitor:
    """Checks every update; keeps the window of recent training nll (bits), which checkpoints carry."""

    def __init__(
        self,
        setting: float | str | None,
        window: int,
        after: int,
        fp16: bool,
        fairseq_scaler: LossScale | None = None,
        min_loss_scale: float = MIN_LOSS_SCALE,
    ) -> None:
        self.setting = setting
        self.after = after  # the update from which a run still at the threshold is stuck
        self.fp16 = fp16
        self.fairseq_scaler = fairseq_scaler  # fairseq_fp16: its scaler's floor and minimum apply
        self.min_loss_scale = min_loss_scale
        self.floor_overflows = 0  # fairseq_fp16: consecutive overflows with the scale at its floor
        self.recent_nll: collections.deque[float] = collections.deque(maxlen=window)
        self.learned = False  # a window mean went LEARNED_MARGIN_BITS below the threshold
        self.threshold = math.nan  # nll bits/token; set by set_threshold from the config and the data
        self.uniform = math.inf  # log2(target vocab)

    def set_threshold(self, vocab_size: int, targets: IndexedDataset, tgt_vocab_size: int, eos: int) -> float:
        self.uniform = math.log2(tgt_vocab_size)
        if self.setting is None:
            self.threshold = math.log2(vocab_size)  # worse than a uniform guess
        elif self.setting != UNIGRAM:
            self.threshold = float(self.setting)
        else:
            self.threshold = unigram_entropy_bits(targets, tgt_vocab_size, eos)
        return self.threshold

    def state(self) -> dict[str, object]:
        return {
            "recent_nll": list(self.recent_nll),
            "learned": self.learned,
            "floor_overflows": self.floor_overflows,
        }

    def restore(self, state: dict[str, object]) -> None:
        self.recent_nll.clear()
        self.recent_nll.extend(float(x) for x in state.get("recent_nll", []))  # type: ignore[union-attr]
        self.learned = bool(state.get("learned", False))
        self.floor_overflows = int(state.get("floor_overflows", 0))  # type: ignore[call-overload]

    def check(
        self,
        num_updates: int,
        loss_bits: float,
        nll_bits: float,
        gnorm: float,
        loss_scale: float | None,
        skipped: bool = False,
    ) -> Verdict | None:
        """The verdict if the run diverged at this update (``num_updates`` done before it), else None.
        ``loss_scale`` is the fp16 scale after this update's rescale; ``skipped``: it overflowed."""
        if self.fairseq_scaler is not None:
            return self._check_fairseq_scale(skipped) or (
                None if skipped else self._check_values(num_updates, loss_bits, nll_bits, gnorm)
            )
        if self.fp16:
            if loss_scale is not None and loss_scale < MIN_LOSS_SCALE:
                return Verdict(
                    "loss_scale", f"fp16 loss scale fell below {MIN_LOSS_SCALE} (gradients keep overflowing)"
                )
            if not math.isfinite(gnorm):
                return None  # an overflow the scaler has just handled
        return self._check_values(num_updates, loss_bits, nll_bits, gnorm)

    def _check_fairseq_scale(self, skipped: bool) -> Verdict | None:
        scaler = self.fairseq_scaler
        assert scaler is not None
        if not skipped:
            self.floor_overflows = 0
            return None
        if scaler.loss_scale <= self.min_loss_scale:
            # fairseq's words (fp16_optimizer.py:142-146), where it raises FloatingPointError
            return Verdict(
                "loss_scale",
                f"Minimum loss scale reached ({self.min_loss_scale}). Your loss is probably exploding.",
            )
        self.floor_overflows = self.floor_overflows + 1 if scaler.at_floor() else 0
        if self.floor_overflows >= FLOOR_OVERFLOW_UPDATES:
            return Verdict(
                "loss_scale",
                f"fp16 loss scale at its floor {scaler.loss_scale:g} (--threshold-loss-scale) and "
                f"{self.floor_overflows} updates in a row overflowed; fairseq would skip every update from here",
            )
        return None

    def _check_values(
        self, num_updates: int, loss_bits: float, nll_bits: float, gnorm: float
    ) -> Verdict | None:
        if not math.isfinite(loss_bits):
            return Verdict("non_finite", f"non-finite loss ({loss_bits})")
        if not math.isfinite(gnorm):
            return Verdict("non_finite", f"non-finite gradient norm ({gnorm})")
        # The nll, not the label-smoothed loss: the threshold is a cross-entropy of the data.
        self.recent_nll.append(nll_bits)
        if len(self.recent_nll) < (self.recent_nll.maxlen or 0):
            return None
        return self._judge(num_updates + 1, f"over the last {len(self.recent_nll)} updates")

    def final_check(self, num_updates: int) -> Verdict | None:
        """At the end of training, the same clauses on the last (possibly partial) window."""
        if len(self.recent_nll) < MIN_FINAL_UPDATES or len(self.recent_nll) == self.recent_nll.maxlen:
            return None  # too short to judge, or check() has judged every full window already
        return self._judge(
            num_updates, f"over its last {len(self.recent_nll)} updates, at the end of training"
        )

    def _judge(self, update: int, where: str) -> Verdict | None:
        mean = sum(self.recent_nll) / len(self.recent_nll)
        what = "the unigram entropy " if self.setting == UNIGRAM else ""
        stated = f"mean training nll {mean:.3f} bits/token {where}"
        if mean > self.uniform + UNIFORM_MARGIN_BITS:
            return Verdict(
                "worse_than_uniform",
                f"{stated}, more than {UNIFORM_MARGIN_BITS:g} bit above log2(vocab) {self.uniform:.3f}",
            )
        if mean <= self.threshold - LEARNED_MARGIN_BITS:
            self.learned = True
            return None
        if mean < self.threshold:
            return None
        if self.learned:
            return Verdict(
                "blew_up", f"{stated}: back at or above {what}{self.threshold:.3f} after going below it"
            )
        if update >= self.after:
            return Verdict(
                "stuck", f"{stated} at update {update}: still at or above {what}{self.threshold:.3f}"
            )
        return None
