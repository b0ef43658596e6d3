"""Training/validation data: a binarized split, length filtering, per-epoch token batches, sharding."""

from __future__ import annotations

import logging

import numpy as np

from pipeline_lib.data.indexed import ParallelCorpus
from pipeline_lib.train.batching import Batch, collate_indexed, oversized, plan_batches

log = logging.getLogger(__name__)


class SplitData:
    """One split of a binarized directory, with the pairs that cannot be batched filtered out."""

    def __init__(
        self,
        bin_dir: str,
        split: str,
        src_lang: str,
        tgt_lang: str,
        max_tokens: int,
        max_positions: int,
        max_sentences: int | None,
        pad: int,
        bos: int,
        eos: int,
        pad_to_multiple: int = 1,
    ) -> None:
        self.corpus = ParallelCorpus(bin_dir, split, src_lang, tgt_lang)
        self.split = split
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.pad, self.bos, self.eos = pad, bos, eos
        self.pad_to_multiple = pad_to_multiple
        src_sizes, tgt_sizes = self.corpus.src_sizes, self.corpus.tgt_sizes
        dropped = oversized(src_sizes, tgt_sizes, max_tokens, max_positions)
        self.dropped = len(dropped)
        if self.dropped:
            log.warning(
                "%s/%s: skipping %d of %d pairs longer than max_tokens=%d or max_positions=%d",
                bin_dir, split, self.dropped, len(self.corpus), max_tokens, max_positions,
            )  # fmt: skip
        keep = np.ones(len(self.corpus), dtype=bool)
        keep[dropped] = False
        self.keep = np.flatnonzero(keep)
        self.src_sizes = np.asarray(src_sizes)[self.keep]
        self.tgt_sizes = np.asarray(tgt_sizes)[self.keep]

    def __len__(self) -> int:
        return len(self.keep)

    @property
    def num_target_tokens(self) -> int:
        return int(self.tgt_sizes.sum() + len(self.tgt_sizes))

    def batches(self, seed: int, epoch: int, shuffle: bool, multiple_of: int = 1) -> list[np.ndarray]:
        """Corpus indices per batch for ``epoch``; deterministic in (seed, epoch).

        ``multiple_of`` (the DDP world size) trims the shuffled list so that every rank gets the same
        number of batches in every update; at most ``multiple_of - 1`` random batches per epoch are left out.
        """
        plan = plan_batches(
            self.src_sizes, self.tgt_sizes, self.max_tokens, seed, epoch, self.max_sentences, shuffle
        )
        plan = [self.keep[b] for b in plan]
        if multiple_of > 1:
            plan = plan[: len(plan) - len(plan) % multiple_of]
        return plan

    def collate(self, indices: np.ndarray) -> Batch:
        return collate_indexed(
            self.corpus.src, self.corpus.tgt, indices, self.pad, self.bos, self.eos, self.pad_to_multiple
        )
