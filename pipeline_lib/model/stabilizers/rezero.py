"""ReZero (Bachlechner et al. 2020, "ReZero is All You Need").

x = x + α·f(x) with no LayerNorm anywhere and one trainable scalar α per layer, shared by the layer's
sub-layers (2 in the encoder, 3 in the decoder) and 0 at init, so every layer starts as the identity.
As the authors' code: one `self.resweight = nn.Parameter(torch.Tensor([0]))` per layer, used by each
sub-layer (majumderb/rezero@e2c94a8 rezero/transformer/rztx.py:47,74,80 encoder; :115,139,142,148 decoder).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.residual import Branch, ResidualVariant, Site, SublayerConnection


class ReZeroConnection(SublayerConnection):
    normalized = False

    def __init__(self, site: Site, alpha: nn.Parameter | None = None) -> None:
        super().__init__(site)
        self.alpha = alpha if alpha is not None else nn.Parameter(torch.zeros(1))

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return x + self.alpha * self.branch(f, x)


def rezero(config: Any) -> ResidualVariant:
    # One α per (stack, layer), made by the layer's first connection and handed to the others: the
    # same Parameter, like tied embeddings (parameters() lists it once). A build calls the factory
    # once, so the table belongs to one model.
    alphas: dict[tuple[str, int], nn.Parameter] = {}

    def connection(site: Site) -> ReZeroConnection:
        key = (site.stack, site.layer)
        made = ReZeroConnection(site, alphas.get(key))
        alphas.setdefault(key, made.alpha)
        return made

    return ResidualVariant(connection, final_norm=False)
