"""B2T connection (Takase et al. 2023, "B2T Connection: Serving Stability and Performance in Deep
Transformers").

Post-LN, plus a bottom-to-top skip from each layer's input to its last sub-layer, which skips every
LayerNorm of the layer but the last:

    encoder  h = LN(x + Attn(x));                                    y = LN(h + FFN(h) + x)
    decoder  h1 = LN(x + SelfAttn(x)); h2 = LN(h1 + CrossAttn(h1));  y = LN(h2 + FFN(h2) + x)

Layers pass (x, layer input) pairs; the first sub-layer of a layer takes its input as the skip.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from pipeline_lib.model.residual import Branch, PostLNConnection, ResidualVariant, TwoStreamCombiner


class B2TConnection(PostLNConnection):
    def forward(self, stream: tuple[Tensor, Tensor], f: Branch) -> tuple[Tensor, Tensor]:
        x, layer_input = stream
        if self.site.sublayer == 0:
            layer_input = x
        total = x + self.branch(f, x)
        if self.site.last_in_layer:
            total = total + layer_input
        return self.norm(total), layer_input


def b2t(config: Any) -> ResidualVariant:
    return ResidualVariant(B2TConnection, final_norm=False, combiner=lambda layers, d: TwoStreamCombiner())
