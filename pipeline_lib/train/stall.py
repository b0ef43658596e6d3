"""The "failed to train" reference: the entropy of a unigram model of the training targets.

A Transformer that cannot beat a context-free unigram guess after warm-up has not learned to use the
source or the prefix. That is how a too-deep post-LN model fails at a high learning rate (it stalls at
unigram level rather than producing NaNs), and what the papers report as "diverged".
"""

from __future__ import annotations

import math

import numpy as np

from pipeline_lib.data.indexed import IndexedDataset

UNIGRAM = "unigram"


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
