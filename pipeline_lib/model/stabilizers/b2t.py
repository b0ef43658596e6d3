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

Base init (``ModelConfig.stabilizer_init``): ``authors`` (default) as that code's fairseq draws it
before the rescaling: fc1 and fc2 are plain ``nn.Linear`` (build_fc1/build_fc2, transformer_layer.py:
59-63, 219-223), PyTorch's default U(±1/√fan_in) for weight and bias, and the attention's q/k/v
biases keep ``nn.Linear``'s U(±1/√d) (multihead_attention.py:58-62, reset_parameters :85-99 draws only
the weights); ``fairseq``: the shared fairseq base (Xavier fc1/fc2, all biases 0).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.residual import (
    STACKS,
    Branch,
    PostLNConnection,
    ResidualVariant,
    TwoStreamCombiner,
)
from pipeline_lib.model.stabilizers.redraw import attention_blocks, torch_default_, torch_default_bias_


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


def _draw_as_b2t_fairseq(layers: nn.Module) -> None:
    with torch.no_grad():
        for layer in layers:
            for _, branch in layer.sublayers():
                if isinstance(branch, MultiheadAttention):
                    d = branch.out_proj.in_features
                    for _, bias in attention_blocks(branch).values():
                        torch_default_bias_(bias, d)
                else:
                    torch_default_(branch.fc1.weight, branch.fc1.bias)
                    torch_default_(branch.fc2.weight, branch.fc2.bias)


def init(model: nn.Module, config: Any) -> None:
    with torch.no_grad():
        for stack in STACKS:
            layers = getattr(model, stack).layers
            if config.stabilizer_init == "authors":
                _draw_as_b2t_fairseq(layers)
            gain = b2t_gain(len(layers))
            for module in layers.modules():
                if isinstance(module, nn.Linear):
                    module.weight.mul_(gain)


def b2t(config: Any) -> ResidualVariant:
    return ResidualVariant(
        B2TConnection, final_norm=False, combiner=lambda layers, d: TwoStreamCombiner(), init=init
    )
