"""Folding a scaled-shortcut post-LN model into a plain post-LN model with the same outputs.

Admin's ω and DeepNorm's α both compute LN(x·w + f(x)). With x = LN_prev(z), scaling LN_prev's
gamma/beta by w makes it emit x·w, and scaling the branch's input projections by 1/w lets the branch
still see x. The first sub-layer of a stack has no LN before it; its w goes into the embedding's
input gain instead. A connection is foldable when it has ``shortcut_scale()``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.residual import STACKS
from pipeline_lib.model.transformer import TransformerModel


def shortcut_scales(model: TransformerModel, stack: str) -> list[Tensor]:
    """Each sub-layer's shortcut factor, as a (d_model,) tensor, in forward order."""
    scales = []
    for connection in getattr(model, stack).connections():
        if not hasattr(connection, "shortcut_scale"):
            raise ValueError(
                f"residual={model.config.residual!r} has no scaled shortcut to fold into post-LN"
            )
        scale = connection.shortcut_scale().detach()
        scales.append(scale.expand(model.config.d_model).clone())
    return scales


@torch.no_grad()
def fold_to_post_ln(model: TransformerModel) -> TransformerModel:
    """A plain post-LN model computing the same function as ``model`` in eval mode."""
    config = model.config
    scales = {name: shortcut_scales(model, name) for name in STACKS}
    like = next(model.parameters())
    folded = TransformerModel(ModelConfig.from_dict({**config.to_dict(), "residual": "post_ln"}))
    folded.to(device=like.device, dtype=like.dtype)
    wanted = folded.state_dict().keys()
    folded.load_state_dict({k: v for k, v in model.state_dict().items() if k in wanted}, strict=True)
    for name in STACKS:
        plain_stack = getattr(folded, name)
        connections = plain_stack.connections()
        branches = [branch for layer in plain_stack.layers for _, branch in layer.sublayers()]
        for i, (scale, branch) in enumerate(zip(scales[name], branches, strict=True)):
            if i == 0:
                plain_stack.embed.set_input_gain(scale)
            else:
                previous_norm = connections[i - 1].norm
                previous_norm.weight.mul_(scale)
                previous_norm.bias.mul_(scale)
            for projection in branch.input_projections():
                projection.weight.div_(scale.unsqueeze(0))
    return folded
