"""Init-time rescaling shared by the depth-scaled stabilizers."""

from __future__ import annotations

from torch import nn

from pipeline_lib.model.residual import STACKS


def scale_branch_weights(stack: nn.Module, gain: float) -> None:
    """Every branch of the stack: attention value/output projections and both FFN projections × gain."""
    for layer in stack.layers:
        for _, branch in layer.sublayers():
            branch.scale_residual_weights(gain)


def embedding_tables(model: nn.Module) -> list[nn.Embedding]:
    """The distinct token tables (one when source and target share a vocabulary)."""
    tables: list[nn.Embedding] = []
    for name in STACKS:
        table = getattr(model, name).embed.table
        if all(table is not seen for seen in tables):
            tables.append(table)
    return tables
