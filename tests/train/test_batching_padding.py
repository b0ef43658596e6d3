"""``pad_to_multiple``: batch widths from a bounded set, and the same loss as tight padding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pipeline_lib.data.indexed import IndexedDataset, write_dataset
from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.train.batching import collate_indexed
from pipeline_lib.train.loss import label_smoothed_nll_loss

PAD, BOS, EOS, VOCAB = 0, 1, 2, 50


def _datasets(tmp_path: Path) -> tuple[IndexedDataset, IndexedDataset]:
    rng = np.random.default_rng(0)
    for side in ("src", "tgt"):
        sentences = [rng.integers(4, VOCAB, size=int(n)).tolist() for n in rng.integers(1, 30, size=40)]
        write_dataset(tmp_path / side, sentences)
    return IndexedDataset(tmp_path / "src"), IndexedDataset(tmp_path / "tgt")


@pytest.mark.parametrize("multiple", [8, 16])
def test_padded_batches_give_the_same_loss(tmp_path: Path, multiple: int) -> None:
    src, tgt = _datasets(tmp_path)
    torch.manual_seed(0)
    model = build_model(ModelConfig(VOCAB, VOCAB, encoder_layers=2, decoder_layers=2, d_model=32,
                                    ffn_dim=64, heads=4)).eval()  # fmt: skip
    widths = set()
    for indices in (np.arange(0, 13), np.arange(13, 40), np.array([5])):
        tight = collate_indexed(src, tgt, indices, PAD, BOS, EOS)
        padded = collate_indexed(src, tgt, indices, PAD, BOS, EOS, pad_to_multiple=multiple)
        assert padded.src_tokens.shape[1] % multiple == 0 and padded.target.shape[1] % multiple == 0
        assert padded.ntokens == tight.ntokens
        for name in ("src_tokens", "prev_tokens", "target"):
            a, b = getattr(tight, name), getattr(padded, name)
            assert torch.equal(b[:, : a.shape[1]], a) and bool((b[:, a.shape[1] :] == PAD).all())
        widths.add(padded.target.shape[1])
        with torch.no_grad():
            losses = [
                label_smoothed_nll_loss(model(b.src_tokens, b.prev_tokens), b.target, 0.1, PAD)[0]
                for b in (tight, padded)
            ]
        assert float(losses[1]) == pytest.approx(float(losses[0]), rel=1e-5)
    assert all(w % multiple == 0 for w in widths)
