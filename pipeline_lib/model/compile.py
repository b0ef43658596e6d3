"""Regional compilation: ``torch.compile`` on each encoder and decoder layer, not on the whole model.

Every layer of a stack runs the same code with its own weights, so dynamo traces one graph per layer
kind and every layer of that kind reuses it: compile time does not grow with depth (a whole-model
compile of 60L-12L would unroll 72 layers into one graph). The embeddings, the stack combiner (DLCL's
weighted sums, ResiDual's second stream), the output projection and the loss stay eager; they are a
small share of a deep model's time.

Shapes: dynamo specialises on the first batch shape it sees and compiles a dynamic-shape graph on the
second, so ``--pad-to-multiple`` (a bounded set of lengths) keeps recompilations few. Dropout draws
from the compiled graph's own RNG, so masks differ from eager's; they are still a function of the
seed, which the trainer sets before every update.
"""

from __future__ import annotations

from typing import Protocol

from torch import nn

from pipeline_lib.model.config import COMPILE_MODES

COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")
# default: inductor's kernels, launched one by one; reduce-overhead: the same kernels replayed as a CUDA
# graph per layer call and batch shape (inductor's cudagraph trees; CUDA only). The layers' weights are
# static inputs of their graphs, the batch's activations are copied in: with per-GPU batches of a few
# thousand tokens a 60L-12L step is bound by the ~30 launches per layer, not by their arithmetic.


class HasStacks(Protocol):
    encoder: nn.Module
    decoder: nn.Module


def compile_layers(model: HasStacks, backend: str = "inductor", mode: str = "default") -> int:
    """Compile every layer of both stacks in place; returns the number of layers compiled. ``mode`` is
    inductor's (the other backends have none)."""
    if backend not in COMPILE_BACKENDS:
        raise ValueError(f"unknown compile backend {backend!r}; one of {', '.join(COMPILE_BACKENDS)}")
    if mode not in COMPILE_MODES or (mode != "default" and backend != "inductor"):
        raise ValueError(
            f"compile mode {mode!r}: one of {', '.join(COMPILE_MODES)}, non-default with inductor only"
        )
    count = 0
    for stack in (model.encoder, model.decoder):
        for layer in stack.layers:
            layer.compile(backend=backend, **({"mode": mode} if mode != "default" else {}))
            count += 1
    return count


def begin_graph_step() -> None:
    """Tell inductor's cudagraph trees that a new forward begins: the previous micro-batch's graph
    outputs (activations its backward has consumed) may be overwritten. Without it, a replay that
    would overwrite a live output falls back to recording again."""
    import torch

    torch.compiler.cudagraph_mark_step_begin()
