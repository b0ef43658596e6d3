"""Re-drawing a layer's weights as a stabilizer's authors draw them, where their code does not start
from fairseq's base init (``ModelConfig.stabilizer_init: authors``)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from pipeline_lib.model.attention import MultiheadAttention


def attention_blocks(attn: MultiheadAttention) -> dict[str, tuple[Tensor, Tensor | None]]:
    """q, k, v: (weight, bias) views of one d × d projection each, whether fused or not."""
    d = attn.out_proj.in_features
    if attn.self_attention:
        fused = {"q": 0, "k": 1, "v": 2}
        w, b = attn.qkv_proj.weight, attn.qkv_proj.bias
    else:
        fused = {"k": 0, "v": 1}
        w, b = attn.kv_proj.weight, attn.kv_proj.bias
    blocks = {
        name: (w[i * d : (i + 1) * d], None if b is None else b[i * d : (i + 1) * d])
        for name, i in fused.items()
    }
    if not attn.self_attention:
        blocks["q"] = (attn.q_proj.weight, attn.q_proj.bias)
    return blocks


def torch_default_(weight: Tensor, bias: Tensor | None) -> None:
    """``nn.Linear.reset_parameters``: weight kaiming_uniform(a=√5), i.e. U(±1/√fan_in), bias
    U(±1/√fan_in)."""
    with torch.no_grad():
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        if bias is not None:
            bound = 1.0 / math.sqrt(weight.shape[1])
            nn.init.uniform_(bias, -bound, bound)


def torch_default_bias_(bias: Tensor | None, fan_in: int) -> None:
    with torch.no_grad():
        if bias is not None:
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(bias, -bound, bound)
