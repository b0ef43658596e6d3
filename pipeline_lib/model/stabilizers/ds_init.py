"""DS-Init (Zhang, Titov and Sennrich 2019, "Improving Deep Transformer with Depth-Scaled
Initialization and Merged Attention"), on post-LN.

Every weight matrix of layer l (1-based, counted within its stack) is drawn from Xavier's uniform
distribution with the bound divided by sqrt(l): U(-γ, γ), γ = α·sqrt(6 / (fan_in + fan_out)) / sqrt(l),
with the paper's α = 1. Equivalently, Xavier weights × l^(-1/2).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from pipeline_lib.model.residual import STACKS, PostLNConnection, ResidualVariant

ALPHA = 1.0


def ds_init_gain(layer: int) -> float:
    """The gain of 1-based layer ``layer``."""
    return ALPHA / math.sqrt(layer)


@torch.no_grad()
def init(model: nn.Module, config: Any) -> None:
    for stack in STACKS:
        for depth, layer in enumerate(getattr(model, stack).layers, start=1):
            for module in layer.modules():
                if isinstance(module, nn.Linear):
                    module.weight.mul_(ds_init_gain(depth))


def ds_init(config: Any) -> ResidualVariant:
    return ResidualVariant(PostLNConnection, final_norm=False, init=init)
