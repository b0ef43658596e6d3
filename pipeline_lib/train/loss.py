"""Label-smoothed cross-entropy with fairseq's semantics.

For each non-pad target token with log-probabilities ``lp`` over V classes::

    nll    = -lp[target]
    smooth = -sum(lp)                      (all V classes, as fairseq)
    loss   = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * smooth

so the target class gets weight 1 - eps and every other class eps/(V-1). Both sums are over
non-pad target tokens and returned **unnormalised** (in nats); the trainer divides the gradient by
the update's total number of target tokens (fairseq's default, ``sentence_avg`` off) and logs
``loss / ntokens / ln 2`` (bits per token, as fairseq prints it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline_lib.cpu.onednn import onednn_matmul


def label_smoothed_nll_loss(
    logits: Tensor, target: Tensor, epsilon: float, pad: int
) -> tuple[Tensor, Tensor]:
    """(loss_sum, nll_sum) in nats over non-pad tokens; logits (..., V) of any dtype, math in fp32."""
    vocab = logits.shape[-1]
    lprobs = F.log_softmax(logits.float().reshape(-1, vocab), dim=-1)
    target = target.reshape(-1)
    mask = target.ne(pad)
    nll = F.nll_loss(lprobs, target, ignore_index=pad, reduction="sum")
    if epsilon == 0.0:
        return nll, nll.detach()
    smooth = -(lprobs.sum(dim=-1) * mask).sum()
    eps_i = epsilon / (vocab - 1)
    loss = (1.0 - epsilon - eps_i) * nll + eps_i * smooth
    return loss, nll.detach()


def _default_chunk_rows(vocab: int) -> int:
    # ~1M logits per chunk (4 MiB in fp32, cache-sized), but never fewer than 256 rows: each chunk
    # also reads and writes the whole (vocab, d) weight gradient once.
    return max(256, 2**20 // vocab)


def _chunk_loss(
    logits: Tensor, target: Tensor, pad: int, epsilon: float, gradient: bool
) -> tuple[Tensor, Tensor]:
    """(loss_sum, nll_sum) of one chunk, computed in place in ``logits``; with ``gradient`` the chunk
    is left holding d loss / d logits:

        mask * (softmax - eps_i - (1 - eps - eps_i) * onehot(target))

    (the per-class weights, 1 - eps - eps_i on the target and eps_i everywhere, sum to one)."""
    vocab = logits.shape[1]
    eps_i = epsilon / (vocab - 1)
    mask = target.ne(pad).to(logits.dtype)
    target_logit = logits.gather(1, target.unsqueeze(1)).squeeze(1)
    row_sum = logits.sum(dim=1) if epsilon else None
    peak = logits.amax(dim=1, keepdim=True)
    probs = logits.sub_(peak).exp_()  # unnormalised: no log-probabilities are ever built
    total = probs.sum(dim=1)
    lse = total.log().add_(peak.squeeze(1))
    nll = ((lse - target_logit) * mask).sum()
    loss = nll
    if row_sum is not None:
        loss = (1.0 - epsilon - eps_i) * nll + eps_i * ((vocab * lse - row_sum) * mask).sum()
    if gradient:
        probs.mul_((mask / total).unsqueeze(1))
        if eps_i:
            probs.sub_((eps_i * mask).unsqueeze(1))
        probs.scatter_add_(1, target.unsqueeze(1), (-(1.0 - epsilon - eps_i) * mask).unsqueeze(1))
    return loss, nll


@dataclass(frozen=True)
class _Chunking:
    epsilon: float
    pad: int
    rows: int  # tokens per chunk
    onednn: bool  # the products that read the whole weight on oneDNN (it allocates their results)


def _chunked(
    hidden: Tensor, weight: Tensor, target: Tensor, how: _Chunking, gradient: bool
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """(loss_sum, nll_sum, d hidden, d weight) over (tokens, d) ``hidden``, ``how.rows`` tokens at a
    time in one reused logits buffer; the gradients are None without ``gradient``."""
    grad_hidden = torch.empty_like(hidden) if gradient else None
    grad_weight = torch.zeros_like(weight) if gradient else None
    chunk = None if how.onednn else hidden.new_empty(min(how.rows, hidden.shape[0]), weight.shape[0])
    loss = hidden.new_zeros(())
    nll = hidden.new_zeros(())
    for start in range(0, hidden.shape[0], how.rows):
        rows, tgt = hidden[start : start + how.rows], target[start : start + how.rows]
        if chunk is None:
            logits = onednn_matmul(rows, weight, None)
        else:
            logits = torch.mm(rows, weight.t(), out=chunk[: rows.shape[0]])
        chunk_loss, chunk_nll = _chunk_loss(logits, tgt, how.pad, how.epsilon, gradient)
        loss += chunk_loss
        nll += chunk_nll
        if grad_hidden is not None and grad_weight is not None:
            rows_grad = grad_hidden[start : start + how.rows]
            if chunk is None:
                rows_grad.copy_(onednn_matmul(logits, weight.t(), None))
            else:
                torch.mm(logits, weight, out=rows_grad)
            grad_weight.addmm_(logits.t(), rows)
    return loss, nll, grad_hidden, grad_weight


class _ChunkedOutputLoss(torch.autograd.Function):
    """Forward computes the loss *and* its gradients chunk by chunk; backward only scales them."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, hidden: Tensor, weight: Tensor, target: Tensor, how: _Chunking
    ) -> tuple[Tensor, Tensor]:
        loss, nll, grad_hidden, grad_weight = _chunked(hidden, weight, target, how, True)
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden.mul_(grad_loss), grad_weight.mul_(grad_loss), None, None


def output_layer_loss(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    epsilon: float,
    pad: int,
    chunk_rows: int | None = None,
    onednn: bool = False,
) -> tuple[Tensor, Tensor]:
    """``label_smoothed_nll_loss(F.linear(hidden, weight), ...)`` without the (tokens, V) logits.

    The output projection, the loss and their gradients run over ``chunk_rows`` tokens at a time, so
    the logits, log-probabilities and their gradients (three tokens x V fp32 tensors, 32 MiB each for
    2,048 tokens and 4k words) never exist whole. For fp32 CPU training: the same FLOPs, less memory
    traffic and less peak memory. ``hidden`` (..., d) and ``weight`` (V, d) are fp32 (the loss math
    is, and AMP keeps ``label_smoothed_nll_loss``). ``onednn``: the products that read the whole weight
    run on oneDNN (pipeline_lib/cpu/onednn.py).
    """
    if hidden.dtype != torch.float32 or weight.dtype != torch.float32:
        raise ValueError(f"output_layer_loss takes fp32 tensors, got {hidden.dtype} and {weight.dtype}")
    d = hidden.shape[-1]
    vocab = weight.shape[0]
    flat_hidden = hidden.reshape(-1, d)
    flat_target = target.reshape(-1)
    how = _Chunking(epsilon, pad, chunk_rows or _default_chunk_rows(vocab), onednn)
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
        loss, nll = _ChunkedOutputLoss.apply(flat_hidden, weight, flat_target, how)
        return loss, nll
    loss, nll, _, _ = _chunked(flat_hidden, weight, flat_target, how, gradient=False)
    return loss, nll


def ppl(nll_bits_per_token: float) -> float:
    """Perplexity from a base-2 per-token nll (fairseq's ``2 ** nll_loss``), capped to stay finite."""
    return float(2.0 ** min(nll_bits_per_token, 100.0))
