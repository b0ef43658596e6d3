"""Activation checkpointing per layer: a layer's activations are recomputed in backward instead of
being kept from forward, so training memory grows with one layer's activations plus each layer's
input, not with every layer's activations.

torch's checkpoint replays the global RNG state for the recomputation, but the trainer's dropout
draws from a per-micro-batch generator (``pipeline_lib.model.dropout``). The recomputation here
draws from a copy of that generator taken before the layer first ran, so it sees the same masks and
the gradients equal those of an uncheckpointed run.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from pipeline_lib.model.dropout import current_dropout_generator, dropout_generator


def checkpointed_call(layer: nn.Module, *args: Any) -> Any:
    generator = current_dropout_generator()
    if generator is None:
        return checkpoint(layer, *args, use_reentrant=False)
    state = generator.get_state()
    calls = 0

    def run(*inputs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # the forward pass: the trainer's generator, advanced as without checkpointing
            return layer(*inputs)
        replay = torch.Generator(device=generator.device)
        replay.set_state(state)
        with dropout_generator(replay):
            return layer(*inputs)

    return checkpoint(run, *args, use_reentrant=False)
