"""Mutation gaps of attention (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: attention written out head by head and query by query in float64
from the module's own weights (softmax(q k^T / sqrt(d)) v, masked keys left out of the softmax)."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline_lib.model.attention import SMALL_QUERY, MultiheadAttention, avoid_cudnn_attention
from pipeline_lib.model.kv_cache import EncoderKeyValues, SelfAttentionCache

D, HEADS = 8, 2
HEAD_DIM = D // HEADS


def module(self_attention: bool, inner_norm: bool = False, seed: int = 0) -> MultiheadAttention:
    torch.manual_seed(seed)
    attn = MultiheadAttention(D, HEADS, dropout=0.0, self_attention=self_attention, inner_norm=inner_norm)
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_()  # biases too: a dropped bias shows
    return attn.double().eval()


def projections(attn: MultiheadAttention) -> tuple:
    """(Wq, bq, Wk, bk, Wv, bv) as plain tensors, cut from the fused weights by hand."""
    if attn.self_attention:
        w, b = attn.qkv_proj.weight, attn.qkv_proj.bias
        return w[:D], b[:D], w[D : 2 * D], b[D : 2 * D], w[2 * D :], b[2 * D :]
    w, b = attn.kv_proj.weight, attn.kv_proj.bias
    return attn.q_proj.weight, attn.q_proj.bias, w[:D], b[:D], w[D:], b[D:]


def reference(attn, query, key_value, allowed) -> torch.Tensor:
    """``allowed[b][i][j]``: query i of sentence b may attend to key j."""
    wq, bq, wk, bk, wv, bv = projections(attn)
    out = torch.zeros_like(query)
    for b in range(query.shape[0]):
        q, k, v = query[b] @ wq.T + bq, key_value[b] @ wk.T + bk, key_value[b] @ wv.T + bv
        for i in range(query.shape[1]):
            heads = []
            for h in range(HEADS):
                cols = slice(h * HEAD_DIM, (h + 1) * HEAD_DIM)
                keys = [j for j in range(key_value.shape[1]) if allowed[b][i][j]]
                scores = torch.stack([q[i, cols] @ k[j, cols] / math.sqrt(HEAD_DIM) for j in keys])
                weights = torch.softmax(scores, dim=0)
                heads.append(sum(w * v[j, cols] for w, j in zip(weights, keys, strict=True)))
            context = torch.cat(heads)
            if attn.inner_norm is not None:
                context = attn.inner_norm(context)
            out[b, i] = context @ attn.out_proj.weight.T + attn.out_proj.bias
    return out


def everything(batch: int, queries: int, keys: int) -> list:
    return [[[True] * keys for _ in range(queries)] for _ in range(batch)]


@pytest.mark.parametrize("time", [3, SMALL_QUERY, SMALL_QUERY + 1])
def test_self_attention_matches_the_formula_on_both_kernels(time: int) -> None:
    attn = module(True)
    x = torch.randn(2, time, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x), reference(attn, x, x, everything(2, time, time)))


@pytest.mark.parametrize("time", [4, SMALL_QUERY + 2])
def test_padding_and_causal_masks(time: int) -> None:
    attn = module(True)
    x = torch.randn(2, time, D, dtype=torch.float64)
    pad = torch.zeros(2, time, dtype=torch.bool)
    pad[1, -2:] = True  # sentence 1's last two positions are padding
    allowed = [[[j <= i and not pad[b, j] for j in range(time)] for i in range(time)] for b in range(2)]
    with torch.no_grad():
        got = attn(x, key_padding_mask=pad, causal=True)
        torch.testing.assert_close(got, reference(attn, x, x, allowed))
        causal_only = [[[j <= i for j in range(time)] for i in range(time)] for _ in range(2)]
        torch.testing.assert_close(attn(x, causal=True), reference(attn, x, x, causal_only))
        padded_only = [[[not pad[b, j] for j in range(time)] for _ in range(time)] for b in range(2)]
        torch.testing.assert_close(attn(x, key_padding_mask=pad), reference(attn, x, x, padded_only))


@pytest.mark.parametrize("prefix", [1, 3])
def test_a_cached_prefix_shifts_the_causal_mask(prefix: int) -> None:
    """Two new queries after a cached prefix: query i sees keys 0 .. prefix + i."""
    attn = module(True)
    x = torch.randn(1, prefix + 2, D, dtype=torch.float64)
    cache = SelfAttentionCache()
    with torch.no_grad():
        attn(x[:, :prefix], causal=True, cache=cache)
        got = attn(x[:, prefix:], causal=True, cache=cache)
        allowed = [[[j <= prefix + i for j in range(prefix + 2)] for i in range(2)]]
        torch.testing.assert_close(got, reference(attn, x[:, prefix:], x, allowed))
        # one step at a time, as greedy decoding runs it
        step = SelfAttentionCache()
        outs = [attn(x[:, t : t + 1], causal=True, cache=step) for t in range(prefix + 2)]
        full = reference(attn, x, x, [[[j <= i for j in range(prefix + 2)] for i in range(prefix + 2)]])
        torch.testing.assert_close(torch.cat(outs, dim=1), full)


def test_cross_attention_with_beams_sharing_the_encoder_rows() -> None:
    attn = module(False)
    memory = torch.randn(2, 5, D, dtype=torch.float64)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    beams = 3
    query = torch.randn(2 * beams, 2, D, dtype=torch.float64)
    per_beam_memory = memory.repeat_interleave(beams, dim=0)
    per_beam_pad = pad.repeat_interleave(beams, dim=0)
    allowed = [[[not per_beam_pad[b, j] for j in range(5)] for _ in range(2)] for b in range(2 * beams)]
    expected = reference(attn, query, per_beam_memory, allowed)
    with torch.no_grad():
        torch.testing.assert_close(attn(query, memory, pad, group=beams), expected)
        cache = EncoderKeyValues()
        first = attn(query, memory, pad, cache=cache, group=beams)
        again = attn(query, torch.zeros_like(memory), pad, cache=cache, group=beams)  # keys from the cache
        torch.testing.assert_close(first, expected)
        torch.testing.assert_close(again, expected)


def test_sub_ln_normalizes_the_heads_before_the_output_projection() -> None:
    attn = module(True, inner_norm=True)
    x = torch.randn(1, 3, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x), reference(attn, x, x, everything(1, 3, 3)))


def test_training_without_dropout_computes_what_eval_does() -> None:
    attn = module(True)
    x = torch.randn(2, 20, D, dtype=torch.float64)
    with torch.no_grad():
        expected = reference(attn, x, x, everything(2, 20, 20))
        torch.testing.assert_close(attn.train()(x), expected)


def test_dropout_is_applied_in_training_only() -> None:
    attn = MultiheadAttention(D, HEADS, dropout=0.5, self_attention=True)
    x = torch.randn(2, 6, D)
    with torch.no_grad():
        attn.eval()
        assert torch.equal(attn(x), attn(x))
        attn.train()
        torch.manual_seed(0)
        a = attn(x)
        torch.manual_seed(1)
        assert not torch.allclose(a, attn(x))


@pytest.mark.parametrize("self_attention, rows", [(True, slice(2 * D, 3 * D)), (False, slice(D, 2 * D))])
def test_the_value_rows_and_their_rescaling(self_attention: bool, rows: slice) -> None:
    attn = module(self_attention)
    fused = attn.qkv_proj if self_attention else attn.kv_proj
    before = fused.weight.detach().clone()
    out_before = attn.out_proj.weight.detach().clone()
    assert torch.equal(attn.value_weight(), before[rows])
    attn.scale_residual_weights(0.5, value_gain=3.0)
    after = fused.weight.detach()
    torch.testing.assert_close(after[rows], before[rows] * 1.5)
    keep = torch.ones(before.shape[0], dtype=torch.bool)
    keep[rows] = False
    assert torch.equal(after[keep], before[keep])  # queries and keys keep theirs
    torch.testing.assert_close(attn.out_proj.weight.detach(), out_before * 0.5)
    inputs = attn.input_projections()
    assert inputs == ([attn.qkv_proj] if self_attention else [attn.q_proj])


def test_without_a_value_gain_the_value_rows_take_the_gain_alone() -> None:
    attn = module(True)
    before = attn.qkv_proj.weight.detach().clone()
    attn.scale_residual_weights(0.5)
    torch.testing.assert_close(attn.qkv_proj.weight.detach()[2 * D :], before[2 * D :] * 0.5)


def test_cudnn_attention_is_switched_off() -> None:
    """A global switch, callable without a GPU: cuDNN's attention builds a graph per batch shape."""
    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        avoid_cudnn_attention()
        assert torch.backends.cuda.cudnn_sdp_enabled() is False
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


@pytest.mark.parametrize("time, causal", [(SMALL_QUERY + 4, False), (5, True)])
def test_no_attention_dropout_in_eval_on_the_sdpa_path(time: int, causal: bool) -> None:
    attn = module(True)
    attn.dropout = 0.5
    x = torch.randn(2, time, D, dtype=torch.float64)
    allowed = [[[not causal or j <= i for j in range(time)] for i in range(time)] for _ in range(2)]
    with torch.no_grad():
        torch.testing.assert_close(attn(x, causal=causal), reference(attn, x, x, allowed))
