"""T-Fixup (Huang et al. 2020, "Improving Transformer Optimization Through Better Initialization").

No LayerNorm anywhere (x = x + f(x), no final LN) and no warm-up needed. On top of fairseq's init
(q, k, v at Xavier gain 1/sqrt(2), out/FFN at gain 1, token embeddings N(0, d^-1/2)), for an N-M
encoder-decoder, as the authors' code does it (layer6ai-labs/T-Fixup@b17e166):

    encoder out/fc1/fc2 × 0.67·N^(-1/4); v × 0.67·N^(-1/4)·sqrt(2)   fairseq/modules/transformer_layer.py:36-44
    decoder out/fc1/fc2 × (9M)^(-1/4);   v × (9M)^(-1/4)·sqrt(2)     (self and cross)  :161-170
    source embeddings × (9N)^(-1/4), target × (9M)^(-1/4)           fairseq/models/transformer.py:378-381,604-607

The sqrt(2) puts v at Xavier gain 1. One table shared by source and target (share_all_embeddings) is
scaled once, by the source factor: the decoder skips it `if args.Tfixup and not args.share_all_embeddings`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.residual import STACKS, Branch, ResidualVariant, SublayerConnection
from pipeline_lib.model.stabilizers.scaling import embedding_tables, scale_branch_weights

VALUE_GAIN = math.sqrt(2.0)  # undoes fairseq's 1/sqrt(2) on v (transformer_layer.py:44,170)


def t_fixup_gain(stack: str, encoder_layers: int, decoder_layers: int) -> float:
    """The branch-weight gain of one stack."""
    if stack == "encoder":
        return 0.67 * encoder_layers ** (-1 / 4)
    return (9 * decoder_layers) ** (-1 / 4)


def t_fixup_embedding_gain(stack: str, encoder_layers: int, decoder_layers: int) -> float:
    """The token-embedding gain of one stack's table: (9N)^(-1/4) source, (9M)^(-1/4) target."""
    return (9 * (encoder_layers if stack == "encoder" else decoder_layers)) ** (-1 / 4)


class UnnormalizedConnection(SublayerConnection):
    """x = x + f(x): a residual connection with no LayerNorm."""

    normalized = False

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return x + self.branch(f, x)


def init(model: nn.Module, config: Any) -> None:
    with torch.no_grad():
        n, m = config.encoder_layers, config.decoder_layers
        for stack in STACKS:
            scale_branch_weights(getattr(model, stack), t_fixup_gain(stack, n, m), value_gain=VALUE_GAIN)
        # encoder's table first; a table shared by both stacks is listed once and takes the encoder's factor
        for stack, table in zip(STACKS, embedding_tables(model), strict=False):
            table.weight.mul_(t_fixup_embedding_gain(stack, n, m))


def t_fixup(config: Any) -> ResidualVariant:
    return ResidualVariant(UnnormalizedConnection, final_norm=False, init=init)
