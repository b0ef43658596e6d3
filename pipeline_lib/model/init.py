"""Parameter initialisation: Glorot/Xavier (fairseq's default) or Lipschitz-restricted (Xu et al. 2020)."""

from __future__ import annotations

import math

from torch import nn

from pipeline_lib.model.config import ModelConfig


def _init_embedding(table: nn.Embedding, config: ModelConfig) -> None:
    vocab, dim = table.weight.shape
    if config.init == "lipschitz":
        bound = math.sqrt(2.0 / (dim + vocab))
        nn.init.uniform_(table.weight, -bound, bound)
    else:
        nn.init.normal_(table.weight, mean=0.0, std=dim**-0.5)
    if table.padding_idx is not None:
        table.weight.data[table.padding_idx].zero_()


def _init_linear(linear: nn.Linear, config: ModelConfig) -> None:
    if config.init == "lipschitz":
        # U(-1/sqrt(fan_in), +1/sqrt(fan_in)): each branch starts as a <=0.5-Lipschitz map in expectation.
        bound = 1.0 / math.sqrt(linear.in_features)
        nn.init.uniform_(linear.weight, -bound, bound)
    else:
        # On the fused (3d x d) QKV matrix this equals fairseq's per-projection gain 1/sqrt(2).
        nn.init.xavier_uniform_(linear.weight)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


def initialize(model: nn.Module, config: ModelConfig) -> None:
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            _init_embedding(module, config)
        elif isinstance(module, nn.Linear):
            _init_linear(module, config)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
