"""Mutation gaps of batching (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: batches and padded tensors worked out by hand below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_lib.data.indexed import IndexedDataset, write_dataset
from pipeline_lib.train.batching import Batch, collate_indexed, oversized, plan_batches

PAD, BOS, EOS = 1, 0, 2

# Sizes without eos; with it (+1): src [4, 2, 5, 2, 6, 10], tgt [3, 3, 7, 2, 4, 3]. Sorted by target
# then source length: 3 (2/2), 1 (3/2), 0 (3/4), 5 (3/10), 4 (4/6), 2 (7/5); each one's cost, the longer
# side: 2, 3, 4, 10, 6, 7.
SRC_SIZES = [3, 1, 4, 1, 5, 9]
TGT_SIZES = [2, 2, 6, 1, 3, 2]


def plan(max_tokens: int, max_sentences: int | None = None, **kw) -> list[list[int]]:
    batches = plan_batches(np.array(SRC_SIZES), np.array(TGT_SIZES), max_tokens, 0, 1, max_sentences, **kw)
    return [b.tolist() for b in batches]


def test_a_batch_fills_up_to_max_tokens_inclusive() -> None:
    # 3 sentences at longest 4 cost exactly 12: they fit; the 10-token one then costs 40
    assert plan(12, shuffle=False) == [[3, 1, 0], [5], [4], [2]]
    assert plan(11, shuffle=False) == [[3, 1], [0], [5], [4], [2]]


def test_max_sentences_caps_a_batch_inclusive() -> None:
    assert plan(100, 2, shuffle=False) == [[3, 1], [0, 5], [4, 2]]
    assert plan(100, 3, shuffle=False) == [[3, 1, 0], [5, 4, 2]]


def test_a_sentence_over_max_tokens_alone_is_its_own_batch() -> None:
    assert plan(8, shuffle=False) == [[3, 1], [0], [5], [4], [2]]
    assert plan(1, shuffle=False) == [[3], [1], [0], [5], [4], [2]]  # the first one too: no empty batch


def test_no_sentences_no_batches() -> None:
    assert plan_batches(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 10, 0, 1) == []


def test_batches_are_shuffled_by_default() -> None:
    epochs = {
        tuple(tuple(b.tolist()) for b in plan_batches(np.array(SRC_SIZES), np.array(TGT_SIZES), 8, 0, epoch))
        for epoch in range(6)
    }
    assert len(epochs) > 1


def test_shuffling_is_a_function_of_seed_and_epoch_only() -> None:
    def shuffled(seed: int, epoch: int) -> list[list[int]]:
        batches = plan_batches(np.array(SRC_SIZES), np.array(TGT_SIZES), 8, seed, epoch, None, True)
        return [b.tolist() for b in batches]

    assert shuffled(3, 2) == shuffled(3, 2)
    orders = {tuple(map(tuple, shuffled(0, epoch))) for epoch in range(6)}
    assert len(orders) > 1  # the batches move between epochs
    for order in orders:  # each epoch covers every sentence once, in the same batches as unshuffled
        assert sorted(map(sorted, order)) == sorted(map(sorted, [[3, 1], [0], [5], [4], [2]]))


def test_equal_lengths_are_ordered_at_random_when_shuffled() -> None:
    sizes = np.full(12, 3)  # two sentences of 4 tokens per batch
    unshuffled = plan_batches(sizes, sizes, 8, 0, 1, None, False)
    assert [b.tolist() for b in unshuffled] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    pairs = {
        tuple(sorted(b.tolist()))
        for epoch in range(4)
        for b in plan_batches(sizes, sizes, 8, 0, epoch, None, True)
    }
    assert pairs - {
        (0, 1),
        (2, 3),
        (4, 5),
        (6, 7),
        (8, 9),
        (10, 11),
    }  # ties are drawn at random, not kept in order


@pytest.mark.parametrize(
    "max_tokens, max_positions, expected",
    [(10, 100, []), (9, 100, [5]), (100, 6, [5]), (100, 5, [4, 5]), (5, 100, [4, 5]), (6, 6, [5])],
)
def test_oversized_counts_eos_and_both_limits(
    max_tokens: int, max_positions: int, expected: list[int]
) -> None:
    # the longer side plus eos: 4, 3, 5, 2, 6, 10; a pair at exactly the limit fits
    src, tgt = np.array([3, 1, 4, 1, 5, 9]), np.array([2, 2, 1, 1, 3, 2])
    assert oversized(src, tgt, max_tokens, max_positions).tolist() == expected


def datasets(tmp_path: Path) -> tuple[IndexedDataset, IndexedDataset]:
    write_dataset(tmp_path / "src", [[10, 11, 12], [], [13], [14, 15]])
    write_dataset(tmp_path / "tgt", [[20], [21, 22], [], [23, 24, 25, 26]])
    return IndexedDataset(tmp_path / "src"), IndexedDataset(tmp_path / "tgt")


def test_collate_indexed_by_hand(tmp_path: Path) -> None:
    src, tgt = datasets(tmp_path)
    batch = collate_indexed(src, tgt, np.array([3, 1, 0, 2], dtype=np.int32), PAD, BOS, EOS)
    assert batch.src_tokens.tolist() == [
        [14, 15, EOS, PAD],
        [EOS, PAD, PAD, PAD],
        [10, 11, 12, EOS],
        [13, EOS, PAD, PAD],
    ]
    assert batch.target.tolist() == [
        [23, 24, 25, 26, EOS],
        [21, 22, EOS, PAD, PAD],
        [20, EOS, PAD, PAD, PAD],
        [EOS, PAD, PAD, PAD, PAD],
    ]
    assert batch.prev_tokens.tolist() == [
        [BOS, 23, 24, 25, 26],
        [BOS, 21, 22, PAD, PAD],
        [BOS, 20, PAD, PAD, PAD],
        [BOS, PAD, PAD, PAD, PAD],
    ]
    assert batch.indices.tolist() == [3, 1, 0, 2] and batch.indices.dtype == torch.int64
    assert batch.ntokens == 5 + 3 + 2 + 1 and batch.nsentences == 4


@pytest.mark.parametrize("multiple, src_width, tgt_width", [(1, 4, 5), (2, 4, 6), (4, 4, 8), (3, 6, 6)])
def test_collate_rounds_each_width_up_to_the_multiple(
    tmp_path: Path, multiple: int, src_width: int, tgt_width: int
) -> None:
    src, tgt = datasets(tmp_path)
    batch = collate_indexed(src, tgt, np.array([3, 1, 0, 2]), PAD, BOS, EOS, pad_to_multiple=multiple)
    assert batch.src_tokens.shape == (4, src_width)
    assert batch.target.shape == batch.prev_tokens.shape == (4, tgt_width)
    assert batch.ntokens == 11


def test_a_batch_of_empty_sentences_is_eos_only(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a", [[], []])
    write_dataset(tmp_path / "b", [[], []])
    batch = collate_indexed(
        IndexedDataset(tmp_path / "a"), IndexedDataset(tmp_path / "b"), np.array([1, 0]), PAD, BOS, EOS
    )
    assert batch.src_tokens.tolist() == batch.target.tolist() == [[EOS], [EOS]]
    assert batch.prev_tokens.tolist() == [[BOS], [BOS]] and batch.ntokens == 2


def test_moving_a_batch_keeps_its_tensors_and_counts(tmp_path: Path) -> None:
    src, tgt = datasets(tmp_path)
    batch = collate_indexed(src, tgt, np.array([0, 3]), PAD, BOS, EOS)
    moved = batch.to("cpu")
    assert isinstance(moved, Batch)
    for name in ("src_tokens", "prev_tokens", "target", "indices"):
        assert torch.equal(getattr(moved, name), getattr(batch, name)), name
    assert moved.ntokens == batch.ntokens == 2 + 5
