"""DeepNorm (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers").

x = LN(α·x + f(x)) at every sub-layer, and at init the value and output projections of attention and
both FFN projections are multiplied by β (queries and keys keep gain 1). Encoder-decoder constants
for N encoder and M decoder layers (the paper's Figure 2 / Table 1):

    encoder  α = 0.81·(N⁴M)^(1/16)   β = 0.87·(N⁴M)^(-1/16)
    decoder  α = (3M)^(1/4)          β = (12M)^(-1/4)

α is a constant, so a trained DeepNorm model folds into plain post-LN like Admin
(``pipeline_lib.model.fold``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.residual import STACKS, Branch, PostLNConnection, ResidualVariant, Site
from pipeline_lib.model.stabilizers.scaling import scale_branch_weights


def deepnorm_constants(stack: str, encoder_layers: int, decoder_layers: int) -> tuple[float, float]:
    """(α, β) of one stack of an N-M encoder-decoder."""
    n, m = encoder_layers, decoder_layers
    if stack == "encoder":
        depth = n**4 * m
        return 0.81 * depth ** (1 / 16), 0.87 * depth ** (-1 / 16)
    return (3 * m) ** (1 / 4), (12 * m) ** (-1 / 4)


class DeepNormConnection(PostLNConnection):
    def __init__(self, site: Site) -> None:
        super().__init__(site)
        self.alpha, _ = deepnorm_constants(site.stack, site.encoder_layers, site.decoder_layers)

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return self.norm(x * self.alpha + self.branch(f, x))

    def shortcut_scale(self) -> Tensor:
        return torch.tensor(self.alpha, dtype=self.norm.weight.dtype, device=self.norm.weight.device)


def init(model: nn.Module, config: Any) -> None:
    for stack in STACKS:
        _, beta = deepnorm_constants(stack, config.encoder_layers, config.decoder_layers)
        scale_branch_weights(getattr(model, stack), beta)


def deepnorm(config: Any) -> ResidualVariant:
    return ResidualVariant(DeepNormConnection, final_norm=False, init=init)
