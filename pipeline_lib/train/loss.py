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

import torch.nn.functional as F
from torch import Tensor


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


def ppl(nll_bits_per_token: float) -> float:
    """Perplexity from a base-2 per-token nll (fairseq's ``2 ** nll_loss``), capped to stay finite."""
    return float(2.0 ** min(nll_bits_per_token, 100.0))
