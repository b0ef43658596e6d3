"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/train/loss.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.cpu.onednn import onednn_available
from pipeline_lib.train import loss as loss_module
from pipeline_lib.train.loss import label_smoothed_nll_loss, output_layer_loss, ppl

# -- label-smoothed loss (pipeline_lib/train/loss.py) --------------------------------------------


def test_ppl_is_two_to_the_bits_capped() -> None:
    assert [ppl(0.0), ppl(1.0), ppl(3.0)] == [1.0, 2.0, 8.0]
    assert ppl(1e4) == 2.0**100  # finite for a diverged run


def test_no_smoothing_is_plain_nll_even_with_a_masked_class() -> None:
    # a -inf logit (a class masked out) must not turn epsilon=0 into 0 * inf = nan
    logits = torch.tensor([[0.0, 1.0, float("-inf")], [2.0, 0.0, float("-inf")]])
    target = torch.tensor([1, 0])
    loss, nll = label_smoothed_nll_loss(logits, target, 0.0, pad=-1)
    want = -(torch.log_softmax(logits, dim=-1)[[0, 1], [1, 0]]).sum()
    assert torch.isfinite(loss) and loss.item() == pytest.approx(want.item(), rel=1e-6)
    assert nll.item() == pytest.approx(want.item(), rel=1e-6)


def test_chunked_loss_shifts_each_row_by_its_own_max() -> None:
    # rows whose logits differ by 300: one shift for the whole chunk would underflow exp() of the
    # small row to 0 and give an infinite loss
    weight = torch.eye(4)
    hidden = torch.tensor([[0.0, 1.0, 0.0, 0.0], [300.0, 0.0, 0.0, 0.0]])
    target = torch.tensor([1, 2])
    loss, nll = output_layer_loss(hidden, weight, target, 0.1, pad=-1, chunk_rows=2)
    want_loss, want_nll = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, pad=-1)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, want_loss, rtol=1e-6, atol=0)
    torch.testing.assert_close(nll, want_nll, rtol=1e-6, atol=0)


def test_chunked_loss_gradient_reaches_the_hidden_states_with_a_frozen_output_layer() -> None:
    gen = torch.Generator().manual_seed(3)
    hidden = torch.randn(6, 5, generator=gen)
    weight = torch.randn(7, 5, generator=gen)  # frozen: no requires_grad
    target = torch.tensor([1, 2, 3, 4, 5, 0])
    ref = hidden.clone().requires_grad_()
    label_smoothed_nll_loss(F.linear(ref, weight), target, 0.1, pad=0)[0].backward()
    got = hidden.clone().requires_grad_()
    output_layer_loss(got, weight, target, 0.1, pad=0, chunk_rows=4)[0].backward()
    assert got.grad is not None
    torch.testing.assert_close(got.grad, ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not onednn_available(), reason="no oneDNN")
@pytest.mark.parametrize("onednn", [False, True])
def test_chunked_loss_runs_on_onednn_only_when_asked(monkeypatch: pytest.MonkeyPatch, onednn: bool) -> None:
    calls: list[int] = []
    real = loss_module.onednn_matmul

    def counting(*args: object) -> torch.Tensor:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(loss_module, "onednn_matmul", counting)
    gen = torch.Generator().manual_seed(4)
    hidden = torch.randn(6, 5, generator=gen).requires_grad_()
    weight = torch.randn(7, 5, generator=gen).requires_grad_()
    target = torch.tensor([1, 2, 3, 4, 5, 0])
    kwargs = {"onednn": True} if onednn else {}  # the default is the plain torch.mm path
    output_layer_loss(hidden, weight, target, 0.1, pad=0, chunk_rows=4, **kwargs)[0].backward()
    # two chunks, each a forward product and a d hidden product on oneDNN
    assert len(calls) == (4 if onednn else 0)
