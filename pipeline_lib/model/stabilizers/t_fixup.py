"""T-Fixup (Huang et al. 2020, "Improving Transformer Optimization Through Better Initialization").

No LayerNorm anywhere (x = x + f(x), no final LN) and no warm-up needed. On top of Xavier weights and
N(0, d^-1/2) token embeddings, for an N-M encoder-decoder:

    encoder attention value/output and FFN weights   × 0.67·N^(-1/4)
    decoder attention value/output and FFN weights   × (9M)^(-1/4)   (self- and cross-attention)
    token embeddings (source and target)             × (9M)^(-1/4)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.residual import STACKS, Branch, ResidualVariant, SublayerConnection
from pipeline_lib.model.stabilizers.scaling import embedding_tables, scale_branch_weights


def t_fixup_gain(stack: str, encoder_layers: int, decoder_layers: int) -> float:
    """The branch-weight gain of one stack; the embeddings take the decoder's."""
    if stack == "encoder":
        return 0.67 * encoder_layers ** (-1 / 4)
    return (9 * decoder_layers) ** (-1 / 4)


class UnnormalizedConnection(SublayerConnection):
    """x = x + f(x): a residual connection with no LayerNorm."""

    normalized = False

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return x + self.branch(f, x)


@torch.no_grad()
def init(model: nn.Module, config: Any) -> None:
    n, m = config.encoder_layers, config.decoder_layers
    for stack in STACKS:
        scale_branch_weights(getattr(model, stack), t_fixup_gain(stack, n, m))
    for table in embedding_tables(model):
        table.weight.mul_(t_fixup_gain("decoder", n, m))


def t_fixup(config: Any) -> ResidualVariant:
    return ResidualVariant(UnnormalizedConnection, final_norm=False, init=init)
