"""ReZero (Bachlechner et al. 2020, "ReZero is All You Need").

x = x + α·f(x) with one trainable scalar α per sub-layer, α = 0 at init, and no LayerNorm anywhere:
every layer starts as the identity.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.residual import Branch, ResidualVariant, Site, SublayerConnection


class ReZeroConnection(SublayerConnection):
    normalized = False

    def __init__(self, site: Site) -> None:
        super().__init__(site)
        self.alpha = nn.Parameter(torch.zeros(1))

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return x + self.alpha * self.branch(f, x)


def rezero(config: Any) -> ResidualVariant:
    return ResidualVariant(ReZeroConnection, final_norm=False)
