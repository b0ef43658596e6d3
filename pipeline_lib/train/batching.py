"""Token-count batching, as fairseq does it: bucket by length, fill up to max_tokens, shuffle batches.

A batch's cost is its padded size: sentences x longest (source or target) length, eos/bos included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from pipeline_lib.data.indexed import IndexedDataset


@dataclass
class Batch:
    src_tokens: Tensor  # (B, S): ids + eos, right-padded
    prev_tokens: Tensor  # (B, T): bos + ids
    target: Tensor  # (B, T): ids + eos
    indices: Tensor  # (B,) sentence ids in the corpus
    ntokens: int  # non-pad target tokens

    @property
    def nsentences(self) -> int:
        return int(self.src_tokens.shape[0])

    def pin_memory(self) -> Batch:
        """Page-locked copies, so that ``to(cuda)`` does not wait for the GPU's queue to drain."""
        return Batch(
            self.src_tokens.pin_memory(),
            self.prev_tokens.pin_memory(),
            self.target.pin_memory(),
            self.indices,
            self.ntokens,
        )

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            self.src_tokens.to(device, non_blocking=True),
            self.prev_tokens.to(device, non_blocking=True),
            self.target.to(device, non_blocking=True),
            self.indices,
            self.ntokens,
        )


def plan_batches(
    src_sizes: np.ndarray,
    tgt_sizes: np.ndarray,
    max_tokens: int,
    seed: int,
    epoch: int,
    max_sentences: int | None = None,
    shuffle: bool = True,
) -> list[np.ndarray]:
    """Index arrays, one per batch, for one epoch; deterministic in (seed, epoch).

    Sizes exclude eos/bos (one is added to each side). Sentences that alone exceed max_tokens must be
    filtered beforehand (see ``oversized``).
    """
    src = np.asarray(src_sizes, dtype=np.int64) + 1
    tgt = np.asarray(tgt_sizes, dtype=np.int64) + 1
    rng = np.random.default_rng([seed, epoch])
    # Random tie order within equal lengths, then a stable sort by (target, source) length.
    order = rng.permutation(len(src)) if shuffle else np.arange(len(src))
    order = order[np.lexsort((src[order], tgt[order]))]
    batches: list[np.ndarray] = []
    start, longest = 0, 0
    for pos, idx in enumerate(order):
        length = max(src[idx], tgt[idx])
        new_longest = max(longest, length)
        count = pos - start + 1
        too_many = max_sentences is not None and count > max_sentences
        if count > 1 and (new_longest * count > max_tokens or too_many):
            batches.append(order[start:pos])
            start, new_longest = pos, length
        longest = new_longest
    if start < len(order):
        batches.append(order[start:])
    if shuffle:
        rng.shuffle(batches)
    return batches


def oversized(
    src_sizes: np.ndarray, tgt_sizes: np.ndarray, max_tokens: int, max_positions: int
) -> np.ndarray:
    """Indices of pairs that cannot be batched (too long for max_tokens or the model's positions)."""
    longest = np.maximum(np.asarray(src_sizes), np.asarray(tgt_sizes)) + 1
    return np.flatnonzero((longest > max_tokens) | (longest > max_positions))


def _gather_padded(
    ids: np.ndarray, offsets: np.ndarray, indices: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(B, max_len) int64 matrix of the sentences (0-filled) and their lengths, without a Python loop."""
    starts = np.asarray(offsets[indices], dtype=np.int64)
    lengths = np.asarray(offsets[indices + 1], dtype=np.int64) - starts
    width = int(lengths.max()) if len(lengths) else 0
    cols = np.arange(width, dtype=np.int64)
    mask = cols[None, :] < lengths[:, None]
    out = np.zeros((len(indices), width), dtype=np.int64)
    out[mask] = ids[(starts[:, None] + cols[None, :])[mask]]
    return out, lengths


def _round_up(width: int, multiple: int) -> int:
    return -(-width // multiple) * multiple


def collate_indexed(
    src: IndexedDataset,
    tgt: IndexedDataset,
    indices: np.ndarray,
    pad: int,
    bos: int,
    eos: int,
    pad_to_multiple: int = 1,
) -> Batch:
    """``collate`` straight from memory-mapped datasets: one vectorised gather per side. Widths are
    padded up to a multiple of ``pad_to_multiple`` (pads are masked, so the loss does not change)."""
    indices = np.asarray(indices, dtype=np.int64)
    rows = np.arange(len(indices))
    src_ids, src_len = _gather_padded(src.ids, src.offsets, indices)
    tgt_ids, tgt_len = _gather_padded(tgt.ids, tgt.offsets, indices)

    src_tokens = np.full(
        (len(indices), _round_up(src_ids.shape[1] + 1, pad_to_multiple)), pad, dtype=np.int64
    )
    src_mask = np.arange(src_ids.shape[1])[None, :] < src_len[:, None]
    src_tokens[:, : src_ids.shape[1]][src_mask] = src_ids[src_mask]
    src_tokens[rows, src_len] = eos

    width = _round_up(tgt_ids.shape[1] + 1, pad_to_multiple)
    tgt_mask = np.arange(tgt_ids.shape[1])[None, :] < tgt_len[:, None]
    target = np.full((len(indices), width), pad, dtype=np.int64)
    target[:, : tgt_ids.shape[1]][tgt_mask] = tgt_ids[tgt_mask]
    target[rows, tgt_len] = eos
    prev = np.full((len(indices), width), pad, dtype=np.int64)
    prev[:, 0] = bos
    prev[:, 1 : tgt_ids.shape[1] + 1][tgt_mask] = tgt_ids[tgt_mask]
    return Batch(
        src_tokens=torch.from_numpy(src_tokens),
        prev_tokens=torch.from_numpy(prev),
        target=torch.from_numpy(target),
        indices=torch.from_numpy(indices),
        ntokens=int(tgt_len.sum() + len(indices)),
    )
