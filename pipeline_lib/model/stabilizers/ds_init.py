"""DS-Init (Zhang, Titov and Sennrich 2019, "Improving Deep Transformer with Depth-Scaled
Initialization and Merged Attention"), on post-LN.

Every weight matrix of layer l (1-based, counted within its stack; cross-attention included,
embeddings not) is drawn from Xavier's uniform law with a depth-scaled bound. Paper and code differ
(``ModelConfig.ds_init_variant``):

- ``code`` (default): the authors' released code draws layer l from
  tf.variance_scaling_initializer(initializer_gain · l^(-1/2), mode="fan_avg", distribution="uniform")
  (bzhangGo/zero@d97e2c2 models/transformer.py:37-45 encoder, 123-131 decoder; initializer_gain=1 in
  docs/depth_scale_init_and_merged_attention/README.md). That scale is a variance factor, so the
  bound is sqrt(3·l^(-1/2) / fan_avg) = Xavier's × l^(-1/4). Default because the released code is what
  the paper's models were trained with.
- ``paper``: U(-γα/sqrt(l), γα/sqrt(l)), γ Xavier's bound, α = 1 (the paper's Eq. 8, the figure
  docs/depth_scale_init_and_merged_attention/dsinit.png): Xavier's × l^(-1/2).

Base init (``ModelConfig.stabilizer_init``): ``authors`` (default) as zero's func.py draws it: the
self-attention's fused q/k/v map is one d × 3d matrix (:196), whose fan_avg bound equals fairseq's
gain 1/√2 per projection, but cross-attention's q, k and v maps are separate d × d matrices (:207,
211-212), at Xavier gain 1: × √2 on the fairseq base. ``fairseq``: the shared base (gain 1/√2) for
cross-attention too. Either way the depth factor multiplies that draw, so the ratio to post-LN's init
at the same seed is exact (cross-attention's q/k/v aside, under ``authors``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.residual import STACKS, PostLNConnection, ResidualVariant
from pipeline_lib.model.stabilizers.redraw import attention_blocks

ALPHA = 1.0
# The exponent of l in the bound's factor, per ModelConfig.ds_init_variant.
EXPONENTS = {"code": -0.25, "paper": -0.5}


def ds_init_gain(layer: int, variant: str = "code") -> float:
    """The bound's factor for 1-based layer ``layer``."""
    return ALPHA * layer ** EXPONENTS[variant]


def cross_attention(module: nn.Module) -> bool:
    return isinstance(module, MultiheadAttention) and not module.self_attention


def init(model: nn.Module, config: Any) -> None:
    with torch.no_grad():
        for stack in STACKS:
            for depth, layer in enumerate(getattr(model, stack).layers, start=1):
                gain = ds_init_gain(depth, config.ds_init_variant)
                for module in layer.modules():
                    if isinstance(module, nn.Linear):
                        module.weight.mul_(gain)
                    if cross_attention(module) and config.stabilizer_init == "authors":
                        for weight, _ in attention_blocks(module).values():
                            weight.mul_(2**0.5)  # zero's separate q/k/v maps: Xavier gain 1, not 1/√2


def ds_init(config: Any) -> ResidualVariant:
    return ResidualVariant(PostLNConnection, final_norm=False, init=init)
