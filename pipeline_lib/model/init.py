"""Parameter initialisation: Glorot/Xavier (fairseq's default) or Lipschitz-restricted (Xu et al. 2020)."""

from __future__ import annotations

import math

import torch
from torch import nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.config import ModelConfig

# fairseq's MultiheadAttention.reset_parameters draws q, k and v each with xavier_uniform at gain
# 1/sqrt(2) when they have equal sizes, and out_proj at gain 1 (fairseq/modules/multihead_attention.py:85-97
# in layer6ai-labs/T-Fixup@b17e166 and takase/b2t_connection@c8e2ad4).
FAIRSEQ_QKV_GAIN = 2**-0.5


def _init_embedding(table: nn.Embedding, config: ModelConfig) -> None:
    vocab, dim = table.weight.shape
    if config.init == "lipschitz":
        bound = math.sqrt(2.0 / (dim + vocab))
        nn.init.uniform_(table.weight, -bound, bound)
    else:
        nn.init.normal_(table.weight, mean=0.0, std=dim**-0.5)
    if table.padding_idx is not None:
        table.weight.data[table.padding_idx].zero_()


@torch.no_grad()
def _xavier_per_projection(linear: nn.Linear, projections: int) -> None:
    """A fused (projections·d × d) matrix drawn as fairseq draws its separate d × d projections.

    On the fused QKV this equals one Xavier draw over the whole matrix (fans d and 3d give the same
    bound), bit for bit; on cross-attention's lone q and fused kv it does not (gain 1 and 0.816)."""
    for block in linear.weight.data.chunk(projections):
        nn.init.xavier_uniform_(block, gain=FAIRSEQ_QKV_GAIN)


def _init_linear(linear: nn.Linear, config: ModelConfig, projections: int | None = None) -> None:
    if config.init == "lipschitz":
        # U(-1/sqrt(fan_in), +1/sqrt(fan_in)): each branch starts as a <=0.5-Lipschitz map in expectation.
        bound = 1.0 / math.sqrt(linear.in_features)
        nn.init.uniform_(linear.weight, -bound, bound)
    elif projections is not None:
        _xavier_per_projection(linear, projections)
    else:
        nn.init.xavier_uniform_(linear.weight)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)


def _attention_inputs(model: nn.Module) -> dict[int, int]:
    """id(linear) -> how many d × d projections it fuses, for every attention input projection."""
    fused: dict[int, int] = {}
    for module in model.modules():
        if isinstance(module, MultiheadAttention):
            if module.self_attention:
                fused[id(module.qkv_proj)] = 3
            else:
                fused[id(module.q_proj)] = 1
                fused[id(module.kv_proj)] = 2
    return fused


def initialize(model: nn.Module, config: ModelConfig) -> None:
    projections = _attention_inputs(model)
    for module in model.modules():  # one pass in module order: the random stream is the old one
        if isinstance(module, nn.Embedding):
            _init_embedding(module, config)
        elif isinstance(module, nn.Linear):
            _init_linear(module, config, projections.get(id(module)))
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
