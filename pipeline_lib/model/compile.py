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

COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")


class HasStacks(Protocol):
    encoder: nn.Module
    decoder: nn.Module


def compile_layers(model: HasStacks, backend: str = "inductor") -> int:
    """Compile every layer of both stacks in place; returns the number of layers compiled."""
    if backend not in COMPILE_BACKENDS:
        raise ValueError(f"unknown compile backend {backend!r}; one of {', '.join(COMPILE_BACKENDS)}")
    count = 0
    for stack in (model.encoder, model.decoder):
        for layer in stack.layers:
            layer.compile(backend=backend)
            count += 1
    return count
