"""Sub-LN (Wang et al. 2022, "Foundation Transformers", the Magneto model).

Pre-LN plus one more LayerNorm inside each branch: on the self-attention output before its output
projection, and on the FFN's hidden activations before fc2. At init the value/output projections and
both FFN projections are multiplied by γ; for an N-M encoder-decoder:

    encoder  γ = sqrt(log(3M)·log(2N) / 3)
    decoder  γ = sqrt(log(3M))

The decoder's cross-attention gets neither the inner LayerNorm nor γ, as in the authors' torchscale
(microsoft/torchscale@4d1e0e8): torchscale/architecture/encoder.py:254-270 (encoder γ),
decoder.py:300-314 (decoder γ, `if "encoder_attn" in name: continue` at 306-307),
component/multihead_attention.py:49-53 (inner LN `if subln and self.self_attention`),
component/feedforward_network.py:123,137-138 (the FFN's inner LN).
"""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from pipeline_lib.model.residual import STACKS, PreLNConnection, ResidualVariant
from pipeline_lib.model.stabilizers.scaling import scale_branch_weights


def sub_ln_gain(stack: str, encoder_layers: int, decoder_layers: int) -> float:
    if stack == "encoder":
        return math.sqrt(math.log(3 * decoder_layers) * math.log(2 * encoder_layers) / 3)
    return math.sqrt(math.log(3 * decoder_layers))


def init(model: nn.Module, config: Any) -> None:
    for stack in STACKS:
        gain = sub_ln_gain(stack, config.encoder_layers, config.decoder_layers)
        scale_branch_weights(getattr(model, stack), gain, cross_attention=False)


def sub_ln(config: Any) -> ResidualVariant:
    return ResidualVariant(PreLNConnection, final_norm=True, inner_norm=True, init=init)
