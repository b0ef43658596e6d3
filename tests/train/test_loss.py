"""The chunked output-layer loss gives label_smoothed_nll_loss's values and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.cpu.onednn import onednn_available
from pipeline_lib.train.loss import label_smoothed_nll_loss, output_layer_loss

PAD = 0


def _inputs(tokens: int = 50, d: int = 16, vocab: int = 37, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, tokens // 2, d, generator=gen)
    weight = torch.randn(vocab, d, generator=gen)
    target = torch.randint(1, vocab, (2, tokens // 2), generator=gen)
    target[0, -4:] = PAD  # right padding, as batches have it
    target[1, -1:] = PAD
    return hidden, weight, target


def _loss_and_grads(fn, hidden, weight, scale: float = 1.0):
    hidden = hidden.clone().requires_grad_()
    weight = weight.clone().requires_grad_()
    loss, nll = fn(hidden, weight)
    (loss * scale).backward()
    return loss.detach(), nll.detach(), hidden.grad, weight.grad


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
@pytest.mark.parametrize("chunk_rows", [1, 7, 50, 256])
@pytest.mark.parametrize(
    "onednn",
    [False, pytest.param(True, marks=pytest.mark.skipif(not onednn_available(), reason="no oneDNN"))],
)
def test_chunked_loss_matches_the_whole_logits_loss(epsilon: float, chunk_rows: int, onednn: bool) -> None:
    hidden, weight, target = _inputs()

    def reference(h, w):
        return label_smoothed_nll_loss(F.linear(h, w), target, epsilon, PAD)

    def chunked(h, w):
        return output_layer_loss(h, w, target, epsilon, PAD, chunk_rows=chunk_rows, onednn=onednn)

    want = _loss_and_grads(reference, hidden, weight, scale=0.37)
    got = _loss_and_grads(chunked, hidden, weight, scale=0.37)
    for name, a, b in zip(("loss", "nll", "d hidden", "d weight"), got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # padding rows get no gradient at all
    assert got[2][0, -4:].abs().max() == 0
    assert want[3].abs().max() > 0


def test_chunked_loss_without_grad_and_with_tied_weights() -> None:
    hidden, weight, target = _inputs(seed=1)
    with torch.no_grad():
        loss, nll = output_layer_loss(hidden, weight, target, 0.1, PAD, chunk_rows=9)
        ref_loss, ref_nll = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, PAD)
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(nll, ref_nll)

    # the output weight doubles as an embedding table: both gradients accumulate into it
    tokens = torch.tensor([[3, 5, 5, 9]])

    def tied(fn):
        w = weight.clone().requires_grad_()
        h = hidden + F.embedding(tokens, w).sum()
        fn(h, w)[0].backward()
        return w.grad

    reference = tied(lambda h, w: label_smoothed_nll_loss(F.linear(h, w), target, 0.1, PAD))
    chunked = tied(lambda h, w: output_layer_loss(h, w, target, 0.1, PAD, chunk_rows=9))
    torch.testing.assert_close(chunked, reference, rtol=1e-5, atol=1e-5)


def test_chunked_loss_is_fp32_only() -> None:
    hidden, weight, target = _inputs()
    with pytest.raises(ValueError, match="fp32"):
        output_layer_loss(hidden.bfloat16(), weight, target, 0.1, PAD)
