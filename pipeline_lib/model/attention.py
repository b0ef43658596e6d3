"""Multi-head attention on top of F.scaled_dot_product_attention, with an incremental cache.

Tensors are batch-first: (batch, time, d_model). A key padding mask is bool (batch, src_len) with
True at padding positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline_lib.model.kv_cache import EncoderKeyValues, SelfAttentionCache
from pipeline_lib.model.linear import Linear

# Below this many query rows per (batch, head), plain matmul + softmax beats the CPU flash kernel
# (incremental decoding attends with one query per step).
SMALL_QUERY = 16


def avoid_cudnn_attention() -> None:
    """Keep SDPA on its flash / memory-efficient kernels on CUDA.

    torch picks cuDNN's attention first on Hopper, and cuDNN builds an execution graph for every new
    (batch, length) shape. Length-bucketed batches make nearly every batch a new shape: on an H100
    (torch 2.11) the builds cost ~10 ms of host time per attention call, 80% of a base model's update.
    The other kernels have no per-shape setup."""
    torch.backends.cuda.enable_cudnn_sdp(False)


def _small_query_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Plain attention for a few queries per (batch, head), in place where it can be: it runs for every
    layer at every decoding step, where allocations and extra passes cost more than the arithmetic.
    (batch, heads) fold into one bmm batch; the caches' views fold without a copy, and a 3-D bmm on
    them is faster on CPU than torch.matmul on the 4-D views."""
    batch, heads, queries, dim = q.shape
    keys = k.shape[2]
    scores = torch.bmm(
        q.reshape(batch * heads, queries, dim), k.reshape(batch * heads, keys, dim).transpose(1, 2)
    ).mul_(1.0 / math.sqrt(dim))
    if mask is not None:
        scores.view(batch, heads, queries, keys).masked_fill_(mask.logical_not(), float("-inf"))
    context = torch.bmm(torch.softmax(scores, dim=-1), v.reshape(batch * heads, keys, dim))
    return context.view(batch, heads, queries, dim)


class MultiheadAttention(nn.Module):
    """Self-attention uses one fused QKV projection; cross-attention fuses only K and V."""

    def __init__(
        self, d_model: int, heads: int, dropout: float, self_attention: bool, inner_norm: bool = False
    ) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = d_model // heads
        self.dropout = dropout
        self.self_attention = self_attention
        if self_attention:
            self.qkv_proj = Linear(d_model, 3 * d_model)
        else:
            self.q_proj = Linear(d_model, d_model)
            self.kv_proj = Linear(d_model, 2 * d_model)
        self.out_proj = Linear(d_model, d_model)
        # Sub-LN: a LayerNorm on the attention output, before out_proj
        self.inner_norm = nn.LayerNorm(d_model) if inner_norm else None

    def input_projections(self) -> list[nn.Linear]:
        """The projections that read the query-side input (what Admin folding rescales)."""
        return [self.qkv_proj] if self.self_attention else [self.q_proj]

    def value_weight(self) -> Tensor:
        """The value projection's rows of the fused QKV (or KV) weight, as a view."""
        fused, first = (self.qkv_proj, 2) if self.self_attention else (self.kv_proj, 1)
        d_model = self.out_proj.in_features
        return fused.weight[first * d_model : (first + 1) * d_model]

    def scale_residual_weights(self, gain: float, value_gain: float = 1.0) -> None:
        """Multiply the value and output projections by ``gain`` (the weights DeepNorm, Sub-LN and
        T-Fixup rescale at init; queries and keys keep theirs), the value by ``value_gain`` more."""
        with torch.no_grad():
            self.value_weight().mul_(gain * value_gain)
            self.out_proj.weight.mul_(gain)

    def _split_heads(self, x: Tensor) -> Tensor:
        batch, time, _ = x.shape
        return x.view(batch, time, self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
        cache: SelfAttentionCache | EncoderKeyValues | None = None,
        group: int = 1,
    ) -> Tensor:
        """``group`` > 1 (cross-attention only): every `group` consecutive query rows share one row of
        ``key_value`` (the beams of one sentence), so encoder keys/values are neither copied nor
        recomputed per beam: the group is folded into the query length instead."""
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
                    k, v = cache.store(k, v)
            if group > 1:  # (B*g, H, T, D) -> (B, H, g*T, D)
                q = q.view(batch // group, group, self.heads, time, self.head_dim).transpose(1, 2)
                q = q.reshape(batch // group, self.heads, group * time, self.head_dim)

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
        if not self.training and not is_causal and q.shape[2] <= SMALL_QUERY:
            out = _small_query_attention(q, k, v, mask)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
            )
        if group > 1:  # (B, H, g*T, D) -> (B*g, H, T, D)
            out = out.view(batch // group, self.heads, group, time, self.head_dim).transpose(1, 2)
            out = out.reshape(batch, self.heads, time, self.head_dim)
        out = out.transpose(1, 2).reshape(batch, time, d_model)
        if self.inner_norm is not None:
            out = self.inner_norm(out)
        return self.out_proj(out)
