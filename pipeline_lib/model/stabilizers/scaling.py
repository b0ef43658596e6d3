"""Init-time rescaling shared by the depth-scaled stabilizers."""

from __future__ import annotations

from torch import nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.residual import STACKS


def scale_branch_weights(
    stack: nn.Module, gain: float, *, value_gain: float = 1.0, cross_attention: bool = True
) -> None:
    """Every branch of the stack: attention value/output projections and both FFN projections × gain.

    ``value_gain`` multiplies the value projections once more (T-Fixup's sqrt(2));
    ``cross_attention=False`` leaves the decoder's cross-attention as it is (Sub-LN)."""
    for layer in stack.layers:
        for _, branch in layer.sublayers():
            if isinstance(branch, MultiheadAttention):
                if cross_attention or branch.self_attention:
                    branch.scale_residual_weights(gain, value_gain)
            else:
                branch.scale_residual_weights(gain)


def embedding_tables(model: nn.Module) -> list[nn.Embedding]:
    """The distinct token tables (one when source and target share a vocabulary)."""
    tables: list[nn.Embedding] = []
    for name in STACKS:
        table = getattr(model, name).embed.table
        if all(table is not seen for seen in tables):
            tables.append(table)
    return tables
