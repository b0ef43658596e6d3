"""Multi-head attention on top of F.scaled_dot_product_attention, with an incremental cache.

Tensors are batch-first: (batch, time, d_model). A key padding mask is bool (batch, src_len) with
True at padding positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class KeyValueCache:
    """Keys/values of one attention module across decoding steps, shaped (B, heads, T, head_dim)."""

    def __init__(self) -> None:
        self.key: Tensor | None = None
        self.value: Tensor | None = None

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        if self.key is not None:
            key = torch.cat([self.key, key], dim=2)
            value = torch.cat([self.value, value], dim=2)
        self.key, self.value = key, value
        return key, value

    def reorder(self, order: Tensor) -> None:
        if self.key is not None:
            self.key = self.key.index_select(0, order)
            self.value = self.value.index_select(0, order)


class MultiheadAttention(nn.Module):
    """Self-attention uses one fused QKV projection; cross-attention fuses only K and V."""

    def __init__(self, d_model: int, heads: int, dropout: float, self_attention: bool) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.dropout = dropout
        self.self_attention = self_attention
        if self_attention:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        else:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def input_projections(self) -> list[nn.Linear]:
        """The projections that read the query-side input (what Admin folding rescales)."""
        return [self.qkv_proj] if self.self_attention else [self.q_proj]

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, time, _ = x.shape
        return x.view(batch, time, self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        cache: KeyValueCache | None = None,
    ) -> Tensor:
        batch, time, d_model = query.shape
        if self.self_attention:
            q, k, v = self.qkv_proj(query).chunk(3, dim=-1)
            q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
            if cache is not None:
                k, v = cache.append(k, v)
        else:
            q = self._split_heads(self.q_proj(query))
            if cache is not None and cache.key is not None:
                k, v = cache.key, cache.value  # encoder keys/values are computed once per sentence
            else:
                k, v = self.kv_proj(key_value).chunk(2, dim=-1)
                k, v = self._split_heads(k), self._split_heads(v)
                if cache is not None:
                    cache.append(k, v)

        mask = None
        if key_padding_mask is not None:
            mask = ~key_padding_mask[:, None, None, :]  # SDPA: True = may attend
        is_causal = False
        if causal and time > 1:
            # Queries are the last `time` positions of the keys (offset > 0 when a cache holds a prefix).
            offset = k.shape[2] - time
            if mask is None and offset == 0:
                is_causal = True  # SDPA's fast path
            else:
                allowed = torch.ones(time, k.shape[2], dtype=torch.bool, device=query.device).tril(offset)
                mask = allowed if mask is None else mask & allowed
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
        )
        return self.out_proj(out.transpose(1, 2).reshape(batch, time, d_model))
