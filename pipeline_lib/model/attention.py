"""Multi-head attention on top of F.scaled_dot_product_attention, with an incremental cache.

Tensors are batch-first: (batch, time, d_model). A key padding mask is bool (batch, src_len) with
True at padding positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

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


def select_rows(tensor: Tensor, order: Tensor, out: Tensor | None = None) -> Tensor:
    """tensor[order] along dim 0, on a 2-D view (several times faster than N-D on CPU); ``out``, when
    it has the right shape, is reused instead of allocating (fresh multi-MB buffers page-fault)."""
    rows = tensor.shape[0]
    shape = (order.shape[0], *tensor.shape[1:])
    reusable = out is not None and out.shape == shape and out.dtype == tensor.dtype and out is not tensor
    if not reusable or (torch.is_grad_enabled() and tensor.requires_grad):
        return tensor.reshape(rows, -1).index_select(0, order).view(shape)
    torch.index_select(tensor.reshape(rows, -1), 0, order, out=out.view(order.shape[0], -1))
    return out


class KeyValueCache:
    """Keys/values of one attention module across decoding steps, shaped (B, heads, T, head_dim).

    Steps are written into a preallocated buffer that grows by doubling, so appending a step does
    not copy the whole history as torch.cat would.
    """

    def __init__(self) -> None:
        self._key: Tensor | None = None
        self._value: Tensor | None = None
        self._spare: tuple[Tensor | None, Tensor | None] = (None, None)  # reorder targets, reused
        self.length = 0

    @property
    def key(self) -> Tensor | None:
        return None if self._key is None else self._key[:, :, : self.length]

    @property
    def value(self) -> Tensor | None:
        return None if self._value is None else self._value[:, :, : self.length]

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        new = key.shape[2]
        if self._key is None or self.length + new > self._key.shape[2]:
            capacity = max(32, 2 * (self.length + new))
            self._key = self._grow(self._key, key, capacity)
            self._value = self._grow(self._value, value, capacity)
        self._key[:, :, self.length : self.length + new] = key
        self._value[:, :, self.length : self.length + new] = value
        self.length += new
        return self.key, self.value

    def _grow(self, old: Tensor | None, like: Tensor, capacity: int) -> Tensor:
        batch, heads, _, dim = like.shape
        buffer = like.new_empty(batch, heads, capacity, dim)
        if old is not None and self.length:
            buffer[:, :, : self.length] = old[:, :, : self.length]
        return buffer

    def reorder(self, order: Tensor) -> None:
        if self._key is not None:
            spare_key, spare_value = self._spare
            self._spare = (self._key, self._value)
            self._key = self._select_filled(self._key, order, spare_key)
            self._value = self._select_filled(self._value, order, spare_value)

    def _select_filled(self, buffer: Tensor, order: Tensor, out: Tensor | None) -> Tensor:
        """buffer[order], copying only the filled steps: the buffer is up to twice as long as what it
        holds, and this copy runs every step of a beam search for every layer (memory-bound)."""
        if torch.is_grad_enabled() and buffer.requires_grad:
            return buffer.index_select(0, order)  # out= cannot record a graph
        shape = (order.shape[0], *buffer.shape[1:])
        if out is None or out.shape != shape or out.dtype != buffer.dtype:
            out = buffer.new_empty(shape)
        n = self.length
        torch.index_select(buffer[:, :, :n], 0, order, out=out[:, :, :n])
        return out


def _small_query_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Plain attention for a few queries per (batch, head), in place where it can be: it runs for every
    layer at every decoding step, where allocations and extra passes cost more than the arithmetic."""
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores.masked_fill_(mask.logical_not(), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


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
                    cache.append(k, v)
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
        return self.out_proj(out.transpose(1, 2).reshape(batch, time, d_model))
