"""oneDNN products for the model's ``Linear`` layers (fp32 CPU), instead of MKL.

torch sends fp32 CPU matmuls to MKL's sgemm; the oneDNN matmul bundled with torch
(``torch.ops.mkldnn._linear_pointwise``) is faster for a training step's and a beam search's shapes,
for the forward product and the input gradient (another ``x @ W``). The weight gradient stays on MKL:
its inner dimension is the token count, where MKL is as fast. oneDNN builds and caches a kernel per
shape, with buffers sized by its input, so ``set_cpu_gemm`` caps the cache at ``CACHED_KERNELS``,
enough for the dozen shapes of one batch. The measurements behind each choice are in
bench/HISTORY.md (2026-11-23).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Protocol

import torch
from torch import Tensor, nn

from pipeline_lib.cpu.gemm_names import CPU_GEMMS
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.linear import Linear
from pipeline_lib.thread_local import thread_local_setting

CACHED_KERNELS = 32
AUTO_MIN_D_MODEL = 256
AUTO_MIN_TOKENS = 2048  # training: tokens per micro-batch
AUTO_MIN_DECODE_ROWS = 256  # decoding: sentences x beam of the largest batch


class WeightGradSink(Protocol):
    def defer(self, weight: Tensor, grad_out: Tensor, inputs: Tensor) -> None: ...


_deferral = threading.local()


def defer_weight_grads(sink: WeightGradSink) -> contextlib.AbstractContextManager[None]:
    """In this thread's backward passes, oneDNN linear layers hand ``(weight, grad_out, x)`` to
    ``sink`` and leave the weight's gradient to whoever computes ``grad_out.T @ x`` (autograd reports
    None for it). CPU autograd runs a backward on the thread that called it."""
    return thread_local_setting(_deferral, "sink", sink)


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def resolve_cpu_gemm(choice: str, d_model: int, rows: int, min_rows: int = AUTO_MIN_TOKENS) -> str:
    """'mkl' or 'onednn'. auto: oneDNN where it was measured faster (bench/HISTORY.md), on AVX-512 CPUs
    for models of d >= 256 whose products have at least ``min_rows`` rows: tokens per micro-batch in
    training (``AUTO_MIN_TOKENS``), sentences x beam in beam search (``AUTO_MIN_DECODE_ROWS``)."""
    if choice not in CPU_GEMMS:
        raise ConfigError(f"cpu gemm {choice!r} is not one of {', '.join(CPU_GEMMS)}")
    if choice == "onednn" and not onednn_available():
        raise ConfigError("--cpu-gemm onednn: this torch build has no oneDNN linear op")
    if choice != "auto":
        return choice
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    large = d_model >= AUTO_MIN_D_MODEL and rows >= min_rows
    return "onednn" if avx512 and large and onednn_available() else "mkl"


def onednn_matmul(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x @ weight.T + bias for 2-D fp32 CPU tensors (weight may be a transposed view)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDnnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return onednn_matmul(x, weight, bias)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = onednn_matmul(grad, weight.t(), None) if ctx.needs_input_grad[0] else None
        grad_weight = None
        if ctx.needs_input_grad[1]:
            sink = getattr(_deferral, "sink", None)
            if sink is None:
                grad_weight = torch.mm(grad.t(), x)
            else:
                sink.defer(weight, grad, x)
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``F.linear`` on oneDNN, for fp32 CPU tensors of any leading shape."""
    if x.dim() == 2:
        # the output itself, not a view of it: an in-place op on a view of a custom Function's output
        # (the FFN's ReLU) makes autograd clone and copy back the whole tensor in backward
        return _OneDnnLinear.apply(x, weight, bias)
    out = _OneDnnLinear.apply(x.reshape(-1, x.shape[-1]), weight, bias)
    return out.view(*x.shape[:-1], out.shape[-1])


def set_cpu_gemm(model: nn.Module, gemm: str) -> None:
    """Route every ``Linear`` of ``model`` through oneDNN ('onednn') or torch's default ('mkl').
    Call it before the process's first oneDNN op: the kernel cache reads its capacity once."""
    if gemm == "onednn":
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(CACHED_KERNELS))
    for module in model.modules():
        if isinstance(module, Linear):
            module.product = onednn_linear if gemm == "onednn" else None


def uses_onednn(module: Linear) -> bool:
    return module.product is onednn_linear
