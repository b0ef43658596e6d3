"""Residual variants as small strategy objects.

A variant decides two things: how one sub-layer's branch f is joined to its input
(``SublayerConnection``), and how a stack combines whole layers (``LayerCombiner``):

    post_ln : x = LN(x + f(x))                       plain stack
    pre_ln  : x = x + f(LN(x))                       plain stack, final LN
    admin   : x = LN(x * w + f(x)), w trainable      plain stack
    dlcl    : pre- or post-LN sub-layers             dynamic linear combination of all layer outputs

The later stabilizers (DeepNorm, Sub-LN, T-Fixup, ReZero, B2T, DS-Init, ResiDual) live one per module
in ``pipeline_lib.model.stabilizers``, built from the same four hooks a :class:`ResidualVariant` has:
the connection, the stack combiner (which also decides what flows between layers: a tensor, or a
pair of streams for B2T and ResiDual), an optional LayerNorm inside the branches, and an init.

Every connection routes its branch output through ``branch_output`` (an identity module), so
Admin profiling can observe branch variances with forward hooks and no special code path.

A connection is built for one site (:class:`Site`: its stack, layer and sub-layer index and the
model's depths), so depth-dependent schemes can scale by N and M. The variants are registered by
name in ``pipeline_lib.model.registry``; the factories at the end of this module build them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.dropout import Dropout

Branch = Callable[[Tensor], Tensor]
STACKS = ("encoder", "decoder")  # a model's two stacks, as Site.stack names them
# What flows between sub-layers and layers: a tensor, or a (main, side) pair (TwoStreamCombiner).
Stream = Tensor | tuple[Tensor, Tensor]


@dataclass(frozen=True)
class Site:
    """Where a residual connection sits: what a depth-aware connection or init needs to know."""

    d_model: int
    dropout: float
    stack: str  # one of STACKS
    layer: int  # 0-based index within the stack
    encoder_layers: int
    decoder_layers: int
    sublayer: int = 0  # 0-based index within the layer
    sublayers: int = 1  # sub-layers in this layer (2 encoder, 3 decoder)

    @property
    def last_in_layer(self) -> bool:
        return self.sublayer == self.sublayers - 1


class SublayerConnection(nn.Module):
    normalized = True  # has its own LayerNorm (``norm``)

    def __init__(self, site: Site) -> None:
        super().__init__()
        self.site = site
        if self.normalized:
            self.norm = nn.LayerNorm(site.d_model)
        self.dropout = Dropout(site.dropout)
        self.branch_output = nn.Identity()

    def branch(self, f: Branch, x: Tensor) -> Tensor:
        return self.branch_output(self.dropout(f(x)))


class PostLNConnection(SublayerConnection):
    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return self.norm(x + self.branch(f, x))


class PreLNConnection(SublayerConnection):
    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return x + self.branch(f, self.norm(x))


class AdminConnection(SublayerConnection):
    """Post-LN with the shortcut scaled by a trainable vector ω (Liu et al. 2020)."""

    def __init__(self, site: Site) -> None:
        super().__init__(site)
        self.omega = nn.Parameter(torch.ones(site.d_model))

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return self.norm(x * self.omega + self.branch(f, x))

    def shortcut_scale(self) -> Tensor:
        """The shortcut's per-dimension factor, which folding moves into the LayerNorm before it."""
        return self.omega


class LayerCombiner(nn.Module):
    """Plain stacking: layer l+1 reads layer l's output.

    The per-forward state (the layer outputs so far) lives in a list owned by the caller, never on the
    module: threads share one model (``--cpu-workers``, ``translate --workers``).
    """

    def start(self, embedded: Tensor) -> list[Tensor]:
        return [embedded]

    def next_input(self, state: list[Tensor]) -> Tensor:
        return state[-1]

    def add(self, state: list[Tensor], layer_output: Tensor) -> None:
        state[-1] = layer_output

    def output(self, state: list[Tensor]) -> Tensor:
        return state[-1]


class TwoStreamCombiner(LayerCombiner):
    """Layers pass a pair (main, side) instead of one tensor (B2T's layer input, ResiDual's second
    stream); the stack's output is the main stream. Connections unpack the pair themselves."""

    def start(self, embedded: Tensor) -> list[Any]:
        return [(embedded, embedded)]

    def output(self, state: list[Any]) -> Tensor:
        return state[-1][0]


class DynamicLinearCombination(LayerCombiner):
    """DLCL (Wang et al. 2019): layer l+1 reads G(y_0..y_l) with learnable lower-triangular weights.

    pre-norm:  G = sum_k W[l, k] * LN_k(y_k)      post-norm: G = LN_l(sum_k W[l, k] * y_k)
    Row r of W starts at 1/(r+1) on its first r+1 entries ("avg"). y_0 is the embedding.
    """

    def __init__(self, num_layers: int, d_model: int, norm: str) -> None:
        super().__init__()
        size = num_layers + 1
        rows = torch.arange(1, size + 1, dtype=torch.float32).unsqueeze(1)
        self.register_buffer("mask", torch.ones(size, size).tril(), persistent=False)
        self.weight = nn.Parameter(self.mask / rows)
        self.pre_norm = norm == "pre"
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(size))

    def start(self, embedded: Tensor) -> list[Tensor]:
        history: list[Tensor] = []
        self.add(history, embedded)
        return history

    def add(self, state: list[Tensor], layer_output: Tensor) -> None:
        if self.pre_norm:
            layer_output = self.norms[len(state)](layer_output)
        state.append(layer_output)

    def next_input(self, state: list[Tensor]) -> Tensor:
        row = len(state) - 1
        weights = (self.weight * self.mask)[row, : row + 1]
        combined = torch.einsum("k,k...->...", weights.to(state[0].dtype), torch.stack(state))
        return combined if self.pre_norm else self.norms[row](combined)

    def output(self, state: list[Tensor]) -> Tensor:
        return self.next_input(state)


def plain_stack(num_layers: int, d_model: int) -> LayerCombiner:
    return LayerCombiner()


@dataclass(frozen=True)
class ResidualVariant:
    """Everything a stack needs to know about one residual variant."""

    connection: Callable[[Site], SublayerConnection]
    final_norm: bool
    # (layers, d_model) -> the stack's combiner
    combiner: Callable[[int, int], LayerCombiner] = plain_stack
    # A LayerNorm inside each branch, before its output projection (Sub-LN).
    inner_norm: bool = False
    # Called after the base initialisation (model, config): a variant's own init, e.g. depth scaling.
    init: Callable[[nn.Module, Any], None] | None = None

    def make_combiner(self, num_layers: int, d_model: int) -> LayerCombiner:
        return self.combiner(num_layers, d_model)


# ------------------------------------------------------------------ factories (see model/registry.py)
def post_ln(config: Any) -> ResidualVariant:
    return ResidualVariant(PostLNConnection, final_norm=False)


def pre_ln(config: Any) -> ResidualVariant:
    return ResidualVariant(PreLNConnection, final_norm=True)


def admin(config: Any) -> ResidualVariant:
    return ResidualVariant(AdminConnection, final_norm=False)


def dlcl(config: Any) -> ResidualVariant:
    # DLCL's pre-norm stack ends with an LN of its own; post-norm's combination is already normed.
    def combiner(num_layers: int, d_model: int) -> LayerCombiner:
        return DynamicLinearCombination(num_layers, d_model, config.dlcl_norm)

    if config.dlcl_norm == "pre":
        return ResidualVariant(PreLNConnection, final_norm=True, combiner=combiner)
    return ResidualVariant(PostLNConnection, final_norm=False, combiner=combiner)
