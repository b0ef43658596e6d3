"""Encoder and decoder layers: sub-layers wrapped in the variant's residual connection."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.dropout import Dropout
from pipeline_lib.model.kv_cache import EncoderKeyValues, SelfAttentionCache
from pipeline_lib.model.linear import Linear
from pipeline_lib.model.residual import ResidualVariant, Site


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float) -> None:
        super().__init__()
        self.fc1 = Linear(d_model, ffn_dim)
        self.fc2 = Linear(ffn_dim, d_model)
        self.activation_dropout = Dropout(activation_dropout)

    def input_projections(self) -> list[nn.Linear]:
        return [self.fc1]

    def forward(self, x: Tensor) -> Tensor:
        # 2-D, so that fc1's output is a tensor of its own, not a view: an in-place ReLU on a view
        # makes autograd zero-fill, clone and copy the whole hidden tensor back in backward.
        hidden = F.relu(self.fc1(x.reshape(-1, x.shape[-1])), inplace=True)
        return self.fc2(self.activation_dropout(hidden)).view(x.shape)


def site(config: ModelConfig, stack: str, layer: int) -> Site:
    return Site(config.d_model, config.dropout, stack, layer, config.encoder_layers, config.decoder_layers)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, variant: ResidualVariant, index: int = 0) -> None:
        super().__init__()
        d, here = config.d_model, site(config, "encoder", index)
        self.self_attn = MultiheadAttention(d, config.heads, config.attention_dropout, self_attention=True)
        self.self_attn_residual = variant.connection(here)
        self.ffn = FeedForward(d, config.ffn_dim, config.activation_dropout)
        self.ffn_residual = variant.connection(here)

    def sublayers(self) -> list[tuple[nn.Module, nn.Module]]:
        """(residual connection, branch) pairs in forward order."""
        return [(self.self_attn_residual, self.self_attn), (self.ffn_residual, self.ffn)]

    def forward(self, x: Tensor, padding_mask: Tensor | None) -> Tensor:
        x = self.self_attn_residual(x, lambda h: self.self_attn(h, key_padding_mask=padding_mask))
        return self.ffn_residual(x, self.ffn)


class DecoderLayerCache:
    def __init__(self, group: int = 1) -> None:
        self.self_attn = SelfAttentionCache()
        self.cross_attn = EncoderKeyValues()
        self.group = group  # decoder rows per encoder row (beam size)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, variant: ResidualVariant, index: int = 0) -> None:
        super().__init__()
        d, here = config.d_model, site(config, "decoder", index)
        self.self_attn = MultiheadAttention(d, config.heads, config.attention_dropout, self_attention=True)
        self.self_attn_residual = variant.connection(here)
        self.cross_attn = MultiheadAttention(d, config.heads, config.attention_dropout, self_attention=False)
        self.cross_attn_residual = variant.connection(here)
        self.ffn = FeedForward(d, config.ffn_dim, config.activation_dropout)
        self.ffn_residual = variant.connection(here)

    def sublayers(self) -> list[tuple[nn.Module, nn.Module]]:
        return [
            (self.self_attn_residual, self.self_attn),
            (self.cross_attn_residual, self.cross_attn),
            (self.ffn_residual, self.ffn),
        ]

    def forward(
        self,
        x: Tensor,
        encoder_out: Tensor,
        encoder_padding_mask: Tensor | None,
        cache: DecoderLayerCache | None = None,
    ) -> Tensor:
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
