"""B2T connection (Takase et al. 2023, "B2T Connection: Serving Stability and Performance in Deep
Transformers").

Post-LN, plus a bottom-to-top skip from each layer's input to its last sub-layer, which skips every
LayerNorm of the layer but the last:

    encoder  h = LN(x + Attn(x));                                    y = LN(h + FFN(h) + x)
    decoder  h1 = LN(x + SelfAttn(x)); h2 = LN(h1 + CrossAttn(h1));  y = LN(h2 + FFN(h2) + x)

Layers pass (x, layer input) pairs; the first sub-layer of a layer takes its input as the skip.

Init, as the authors' code since its commit "Modify initialization" (takase/b2t_connection@c8e2ad4,
fairseq/modules/transformer_layer.py:55-57 encoder, 215-217 decoder, rescaling_init at 401-405): every
weight of every layer but the LayerNorms' (q, k, v, out, fc1, fc2, cross-attention's too) × N_stack^(-1/2),
N_stack the layer count of its own stack; biases and embeddings keep theirs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.residual import (
    STACKS,
    Branch,
    PostLNConnection,
    ResidualVariant,
    TwoStreamCombiner,
)


class B2TConnection(PostLNConnection):
    def forward(self, stream: tuple[Tensor, Tensor], f: Branch) -> tuple[Tensor, Tensor]:
        x, layer_input = stream
        if self.site.sublayer == 0:
            layer_input = x
        total = x + self.branch(f, x)
        if self.site.last_in_layer:
            total = total + layer_input
        return self.norm(total), layer_input


def b2t_gain(layers: int) -> float:
    """rescaling_init's `layer_num ** -0.5`, layer_num the stack's layer count."""
    return layers**-0.5


@torch.no_grad()
def init(model: nn.Module, config: Any) -> None:
    for stack in STACKS:
        layers = getattr(model, stack).layers
        gain = b2t_gain(len(layers))
        for module in layers.modules():
            if isinstance(module, nn.Linear):
                module.weight.mul_(gain)


def b2t(config: Any) -> ResidualVariant:
    return ResidualVariant(
        B2TConnection, final_norm=False, combiner=lambda layers, d: TwoStreamCombiner(), init=init
    )
