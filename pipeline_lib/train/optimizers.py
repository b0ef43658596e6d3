"""The two optimizers the papers trained with, as the authors' fairseq computes them.

Both differ from ``torch.optim.Adam`` / ``torch.optim.RAdam`` where it decides which runs diverge:

* **Weight decay is decoupled**: ``p -= weight_decay * lr * p``, applied to the weights before the
  Adam step (AdamW's form), where torch's Adam and RAdam add ``weight_decay * p`` to the gradient (L2).
  fairseq's Adam: LiyuanLucasLiu/Transformer-Clinic@70f72b7 fairseq/fairseq/optim/adam.py:174-175
  (the same lines in facebookresearch/fairseq@3d262bb fairseq/optim/adam.py, the weight_decay branch
  before ``addcdiv_``); Transformer-Clinic's RAdam: radam_fairseq/radam.py:114-115.
* **Epsilon outside the bias correction**: ``denom = sqrt(v) + eps`` and
  ``step = lr * sqrt(1 - beta2^t) / (1 - beta1^t)`` (adam.py:168-172), where torch adds ``eps`` to
  ``sqrt(v / (1 - beta2^t))``: the same update but for an ``eps`` that is ``sqrt(1 - beta2^t)`` times
  smaller in torch, which matters in the first updates.
* **RAdam's first steps move nothing**: while the variance rectification term ``N_sma`` is below 5
  (the first 5 updates at beta2 0.98, 6 at 0.999), Transformer-Clinic's RAdam leaves the weights alone
  but for the decay; its momentum step is commented out (radam.py:122-124). ``torch.optim.RAdam``
  takes an unrectified momentum step there, and its threshold is ``> 5``, TC's ``>= 5`` (radam.py:117).
  The Very Deep paper's own script trains with deepnmt's copy of RAdam, which does take that step,
  ``p -= lr / (1 - beta1^t) * m`` (microsoft/deepnmt@7bd2cf5 deepnmt/radam.py:117-119; otherwise
  line for line TC's): ``--optimizer radam_deepnmt``.

The state is fairseq's: ``step`` (an int: counting never reads the device), ``exp_avg`` and
``exp_avg_sq`` per parameter, fp32; a checkpoint of ``torch.optim.Adam`` state loads (its tensor
``step`` is read once, as an int). Gradients
of any dtype are read as fp32, as fairseq's ``grad.data.float()``. Tensors are updated with the
``torch._foreach_*`` kernels (one launch per op for a whole bucket of parameters on a GPU), grouped
by step count, which is the same for every parameter unless one had no gradient in some update.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import torch
from torch import Tensor, nn

# RAdam takes its rectified step once the length of the approximated SMA reaches this
# (Transformer-Clinic radam_fairseq/radam.py:117: ``if N_sma >= 5``).
RADAM_RECTIFY_FROM = 5.0


def radam_sma_length(beta2: float, step: int) -> tuple[float, float]:
    """(N_sma, N_sma_max) after ``step`` updates (radam.py:110-112)."""
    beta2_t = beta2**step
    sma_max = 2 / (1 - beta2) - 1
    return sma_max - 2 * step * beta2_t / (1 - beta2_t), sma_max


def adam_step_size(lr: float, beta1: float, beta2: float, step: int) -> float:
    """fairseq Adam's step size, ``lr * sqrt(1 - beta2^t) / (1 - beta1^t)`` (adam.py:170-172)."""
    return lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)


def radam_step_size(lr: float, beta1: float, beta2: float, step: int) -> float | None:
    """TC RAdam's rectified step size (radam.py:118), or None while N_sma < 5 (no step)."""
    sma, sma_max = radam_sma_length(beta2, step)
    if sma < RADAM_RECTIFY_FROM:
        return None
    beta2_t = beta2**step
    rect = (1 - beta2_t) * (sma - 4) / (sma_max - 4) * (sma - 2) * sma_max / sma / (sma_max - 2)
    return lr * math.sqrt(rect) / (1 - beta1**step)


class _FairseqAdamFamily(torch.optim.Optimizer):
    """Shared state handling; subclasses give the step size for step t (None: no moment step) and
    may take a plain momentum step where the rectified one is not taken."""

    def __init__(
        self,
        params: Iterable[nn.Parameter] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"lr, eps and weight_decay must be >= 0, got {lr}, {eps}, {weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    def _step_size(self, lr: float, beta1: float, beta2: float, step: int) -> float | None:
        raise NotImplementedError

    def _momentum_step_size(self, lr: float, beta1: float, step: int) -> float | None:
        """The size of an unnormalised momentum step where ``_step_size`` is None (None: no step)."""
        return None

    def _state_of(self, p: Tensor) -> dict:
        state = self.state[p]
        if len(state) == 0:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(
                p, dtype=torch.float32, memory_format=torch.preserve_format
            )
        elif isinstance(state["step"], Tensor):  # a checkpoint of torch.optim.Adam's state
            state["step"] = int(state["step"].item())
        return state

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        if closure is not None:
            raise ValueError("closures are not supported")
        for group in self.param_groups:
            buckets: dict[int, list[Tensor]] = defaultdict(list)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("sparse gradients are not supported")
                state = self._state_of(p)
                state["step"] += 1
                buckets[state["step"]].append(p)
            for step, params in buckets.items():
                self._update(group, step, params)

    def _update(self, group: dict, step: int, params: list[Tensor]) -> None:
        lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        states = [self.state[p] for p in params]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        grads = [p.grad if p.grad.dtype == torch.float32 else p.grad.float() for p in params]
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        step_size = self._step_size(lr, beta1, beta2, step)
        # The updates are computed on fp32 weights (fairseq's p.data.float()); a 16-bit parameter is
        # updated through an fp32 copy and rounded once, as fairseq's p.data.copy_(p_data_fp32).
        weights = [p if p.dtype == torch.float32 else p.float() for p in params]
        if decay != 0:
            torch._foreach_add_(weights, weights, alpha=-decay * lr)
        if step_size is not None:
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_add_(denom, eps)
            torch._foreach_addcdiv_(weights, exp_avgs, denom, value=-step_size)
        elif (momentum_size := self._momentum_step_size(lr, beta1, step)) is not None:
            torch._foreach_add_(weights, exp_avgs, alpha=-momentum_size)
        for p, w in zip(params, weights, strict=True):
            if w is not p:
                p.copy_(w)


class FairseqAdam(_FairseqAdamFamily):
    """fairseq's ``--optimizer adam`` (its AdamW-style decoupled decay, eps outside the correction)."""

    def _step_size(self, lr: float, beta1: float, beta2: float, step: int) -> float | None:
        return adam_step_size(lr, beta1, beta2, step)


class TransformerClinicRAdam(_FairseqAdamFamily):
    """Transformer-Clinic's ``--optimizer radam`` (radam_fairseq/radam.py), the Admin paper's optimizer."""

    def _step_size(self, lr: float, beta1: float, beta2: float, step: int) -> float | None:
        return radam_step_size(lr, beta1, beta2, step)


class DeepnmtRAdam(TransformerClinicRAdam):
    """deepnmt's ``--optimizer radam`` (the Very Deep paper's script): TC's, plus a momentum step
    ``lr / (1 - beta1^t) * m`` while N_sma < 5 (microsoft/deepnmt@7bd2cf5 deepnmt/radam.py:117-119)."""

    def _momentum_step_size(self, lr: float, beta1: float, step: int) -> float | None:
        return lr / (1 - beta1**step)


OPTIMIZER_CLASSES: dict[str, type[_FairseqAdamFamily]] = {
    "adam": FairseqAdam,
    "radam": TransformerClinicRAdam,
    "radam_deepnmt": DeepnmtRAdam,
}
