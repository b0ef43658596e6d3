"""Encoder and decoder layers: sub-layers wrapped in the variant's residual connection."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.dropout import Dropout
from pipeline_lib.model.kv_cache import EncoderKeyValues, SelfAttentionCache
from pipeline_lib.model.linear import Linear
from pipeline_lib.model.residual import ResidualVariant, Site, Stream


class FeedForward(nn.Module):
    def __init__(
        self, d_model: int, ffn_dim: int, activation_dropout: float, inner_norm: bool = False
    ) -> None:
        super().__init__()
        self.fc1 = Linear(d_model, ffn_dim)
        self.fc2 = Linear(ffn_dim, d_model)
        self.activation_dropout = Dropout(activation_dropout)
        # Sub-LN: a LayerNorm on the hidden activations, before fc2
        self.inner_norm = nn.LayerNorm(ffn_dim) if inner_norm else None

    def input_projections(self) -> list[nn.Linear]:
        return [self.fc1]

    def scale_residual_weights(self, gain: float) -> None:
        """Multiply both projections by ``gain`` (see ``MultiheadAttention.scale_residual_weights``)."""
        with torch.no_grad():
            self.fc1.weight.mul_(gain)
            self.fc2.weight.mul_(gain)

    def forward(self, x: Tensor) -> Tensor:
        # 2-D, so that fc1's output is a tensor of its own, not a view: an in-place ReLU on a view
        # makes autograd zero-fill, clone and copy the whole hidden tensor back in backward.
        hidden = self.activation_dropout(F.relu(self.fc1(x.reshape(-1, x.shape[-1])), inplace=True))
        if self.inner_norm is not None:
            hidden = self.inner_norm(hidden)
        return self.fc2(hidden).view(x.shape)


def site(config: ModelConfig, stack: str, layer: int, sublayer: int) -> Site:
    sublayers = 2 if stack == "encoder" else 3
    return Site(
        config.d_model, config.dropout, stack, layer, config.encoder_layers, config.decoder_layers,
        sublayer, sublayers,
    )  # fmt: skip


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, variant: ResidualVariant, index: int) -> None:
        super().__init__()
        d, inner = config.d_model, variant.inner_norm
        self.self_attn = MultiheadAttention(
            d, config.heads, config.attention_dropout, self_attention=True, inner_norm=inner
        )
        self.self_attn_residual = variant.connection(site(config, "encoder", index, 0))
        self.ffn = FeedForward(d, config.ffn_dim, config.activation_dropout, inner)
        self.ffn_residual = variant.connection(site(config, "encoder", index, 1))

    def sublayers(self) -> list[tuple[nn.Module, nn.Module]]:
        """(residual connection, branch) pairs in forward order."""
        return [(self.self_attn_residual, self.self_attn), (self.ffn_residual, self.ffn)]

    def forward(self, x: Stream, padding_mask: Tensor | None) -> Stream:
        x = self.self_attn_residual(x, lambda h: self.self_attn(h, key_padding_mask=padding_mask))
        return self.ffn_residual(x, self.ffn)


class DecoderLayerCache:
    def __init__(self, group: int = 1) -> None:
        self.self_attn = SelfAttentionCache()
        self.cross_attn = EncoderKeyValues()
        self.group = group  # decoder rows per encoder row (beam size)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, variant: ResidualVariant, index: int) -> None:
        super().__init__()
        d, inner, heads, dropout = config.d_model, variant.inner_norm, config.heads, config.attention_dropout
        self.self_attn = MultiheadAttention(d, heads, dropout, self_attention=True, inner_norm=inner)
        self.self_attn_residual = variant.connection(site(config, "decoder", index, 0))
        # Sub-LN's inner LayerNorm sits in self-attention only: torchscale builds it `if subln and
        # self.self_attention` (microsoft/torchscale@4d1e0e8 torchscale/component/multihead_attention.py:49-53).
        self.cross_attn = MultiheadAttention(d, heads, dropout, self_attention=False)
        self.cross_attn_residual = variant.connection(site(config, "decoder", index, 1))
        self.ffn = FeedForward(d, config.ffn_dim, config.activation_dropout, inner)
        self.ffn_residual = variant.connection(site(config, "decoder", index, 2))

    def sublayers(self) -> list[tuple[nn.Module, nn.Module]]:
        return [
            (self.self_attn_residual, self.self_attn),
            (self.cross_attn_residual, self.cross_attn),
            (self.ffn_residual, self.ffn),
        ]

    def forward(
        self,
        x: Stream,
        encoder_out: Tensor,
        encoder_padding_mask: Tensor | None,
        cache: DecoderLayerCache | None = None,
    ) -> Stream:
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        group = cache.group if cache is not None else 1
        x = self.self_attn_residual(x, lambda h: self.self_attn(h, causal=True, cache=self_cache))
        x = self.cross_attn_residual(
            x,
            lambda h: self.cross_attn(
                h,
                key_value=encoder_out,
                key_padding_mask=encoder_padding_mask,
                cache=cross_cache,
                group=group,
            ),
        )
        return self.ffn_residual(x, self.ffn)
