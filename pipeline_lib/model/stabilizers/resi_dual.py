"""ResiDual (Xie et al. 2023, "ResiDual: Transformer with Dual Residual Connections").

Two streams see the same branch outputs: a post-LN stream that the branches read, and an
un-normalized stream that only accumulates them (pre-LN's residual), normalized once at the end:

    f_k = f_k(a_k);   a_{k+1} = LN(a_k + f_k);   d_{k+1} = d_k + f_k;   y = a_K + LN(d_K)

with a_0 = d_0 = the embedding output (microsoft/ResiDual@8682f75 resi_dual/resi_dual.py:107,131,252,283;
resi_dual/resi_dual_layers.py:35-51 encoder, 134-177 decoder).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from pipeline_lib.model.residual import Branch, PostLNConnection, ResidualVariant, TwoStreamCombiner


class ResiDualConnection(PostLNConnection):
    def forward(self, stream: tuple[Tensor, Tensor], f: Branch) -> tuple[Tensor, Tensor]:
        post, dual = stream
        update = self.branch(f, post)
        return self.norm(post + update), dual + update


# The final LayerNorm of the un-normalized stream, as the authors' `LayerNorm(..., eps=1e-7)`
# (microsoft/ResiDual@8682f75 resi_dual/resi_dual.py:24 encoder, :157 decoder).
FINAL_NORM_EPS = 1e-7


class ResiDualCombiner(TwoStreamCombiner):
    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=FINAL_NORM_EPS)

    def output(self, state: list[Any]) -> Tensor:
        post, dual = state[-1]
        return post + self.norm(dual)


def resi_dual(config: Any) -> ResidualVariant:
    return ResidualVariant(
        ResiDualConnection, final_norm=False, combiner=lambda layers, d_model: ResiDualCombiner(d_model)
    )
