"""Mutation gaps of split_data (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: a seven-pair corpus whose filtering, batches and padded tensors are
worked out by hand below."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_lib.data.indexed import split_prefix, write_dataset
from pipeline_lib.train.split_data import SplitData

PAD, BOS, EOS = 1, 0, 2
# Source/target lengths 1/2, 2/1, 3/3, 9/2, 2/10, 4/4, 5/6. With eos each side grows by one, so at
# max_tokens=8 (or max_positions=8) pairs 3 (10 tokens) and 4 (11) cannot be batched; the five kept, by (target, source)
# length: 1 (tgt 2), 0 (3), 2 (4), 5 (5), 6 (7).
SRC = [[10], [11, 12], [13, 14, 15], list(range(20, 29)), [16, 17], [30, 31, 32, 33], [40, 41, 42, 43, 44]]
TGT = [
    [50, 51],
    [52],
    [53, 54, 55],
    [56, 57],
    list(range(60, 70)),
    [70, 71, 72, 73],
    [80, 81, 82, 83, 84, 85],
]
KEPT_BY_LENGTH = [1, 0, 2, 5, 6]


def split_data(bin_dir: Path, **kw) -> SplitData:
    write_dataset(split_prefix(bin_dir, "train", "en"), SRC)
    write_dataset(split_prefix(bin_dir, "train", "fr"), TGT)
    fields = dict(max_tokens=8, max_positions=100, max_sentences=None, pad=PAD, bos=BOS, eos=EOS)
    return SplitData(str(bin_dir), "train", "en", "fr", **{**fields, **kw})


def test_pairs_too_long_for_max_tokens_are_dropped_and_said(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.train.split_data"):
        data = split_data(tmp_path)
    assert data.dropped == 2 and len(data) == 5
    assert sorted(np.concatenate(data.batches(0, 1, shuffle=False)).tolist()) == sorted(KEPT_BY_LENGTH)
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path}/train: skipping 2 of 7 pairs longer than max_tokens=8 or max_positions=100"
    ]


def test_unshuffled_batches_are_the_length_order_whatever_the_seed(tmp_path: Path) -> None:
    data = split_data(tmp_path, max_tokens=1000, max_positions=8, max_sentences=1)
    for seed, epoch in [(0, 1), (7, 3)]:
        assert [b.tolist() for b in data.batches(seed, epoch, shuffle=False)] == [[i] for i in KEPT_BY_LENGTH]


def test_max_sentences_caps_every_batch(tmp_path: Path) -> None:
    data = split_data(tmp_path, max_tokens=1000, max_positions=8, max_sentences=2)
    assert [b.tolist() for b in data.batches(0, 1, shuffle=False)] == [[1, 0], [2, 5], [6]]


def test_shuffled_epochs_reorder_the_batches(tmp_path: Path) -> None:
    data = split_data(tmp_path, max_tokens=1000, max_positions=8, max_sentences=1)
    orders = {tuple(int(b[0]) for b in data.batches(0, epoch, shuffle=True)) for epoch in range(1, 9)}
    assert len(orders) > 1


@pytest.mark.parametrize("world, kept", [(1, 5), (2, 4), (3, 3), (5, 5)])
def test_multiple_of_trims_to_a_multiple_of_the_world_size(tmp_path: Path, world: int, kept: int) -> None:
    data = split_data(tmp_path, max_tokens=1000, max_positions=8, max_sentences=1)
    assert len(data.batches(0, 1, shuffle=True, multiple_of=world)) == kept


def test_collate_pads_with_eos_and_bos_by_hand(tmp_path: Path) -> None:
    data = split_data(tmp_path)
    batch = data.collate(np.array([0, 6]))
    assert batch.src_tokens.tolist() == [[10, EOS] + [PAD] * 4, [40, 41, 42, 43, 44, EOS]]
    assert batch.target.tolist() == [[50, 51, EOS] + [PAD] * 4, [80, 81, 82, 83, 84, 85, EOS]]
    assert batch.prev_tokens.tolist() == [[BOS, 50, 51] + [PAD] * 4, [BOS, 80, 81, 82, 83, 84, 85]]
    assert batch.ntokens == 3 + 7


def test_pad_to_multiple_rounds_both_widths_up(tmp_path: Path) -> None:
    data = split_data(tmp_path, pad_to_multiple=4)
    batch = data.collate(np.array([0, 6]))
    assert batch.src_tokens.shape == (2, 8) and batch.target.shape == batch.prev_tokens.shape == (2, 8)
    assert torch.equal(batch.src_tokens[:, 6:], torch.full((2, 2), PAD))
