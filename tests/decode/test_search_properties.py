"""Property-based search invariants on random tiny models and random sources (hypothesis): beam 1
equals greedy, n-best lists are sorted by score, the incremental cache changes nothing, and
padding (batching a sentence with longer ones) changes nothing."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_lib.decode.search import SearchConfig, beam_search, generate, sample_search
from pipeline_lib.decode.translator import collate_sources
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel, build_model

V = 12
CPU = torch.device("cpu")
FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None)
_MODELS: dict[tuple[int, str], TransformerModel] = {}


def model_for(seed: int, residual: str = "pre_ln") -> TransformerModel:
    if (seed, residual) not in _MODELS:  # built once per seed: examples repeat seeds
        torch.manual_seed(seed)
        cfg = ModelConfig(
            src_vocab_size=V, tgt_vocab_size=V, encoder_layers=1, decoder_layers=2, d_model=16,
            ffn_dim=32, heads=2, residual=residual,
        )  # fmt: skip
        _MODELS[seed, residual] = build_model(cfg).eval()
    return _MODELS[seed, residual]


sentence = st.lists(st.integers(4, V - 1), min_size=1, max_size=8)
sources = st.lists(sentence, min_size=1, max_size=4)
seeds = st.integers(0, 3)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@FAST
@given(seeds, sources, st.sampled_from([0.6, 1.0, 1.4]), st.integers(0, 3))
def test_beam_one_equals_greedy(seed, srcs, lenpen, min_len):
    model, src = model_for(seed), collate_sources(srcs, CPU)
    cfg = SearchConfig(beam=1, lenpen=lenpen, min_len=min_len, max_len_b=8)
    for b, g in zip(beam_search(model, src, cfg), sample_search(model, src, cfg), strict=True):
        assert b[0].tokens == g[0].tokens
        assert b[0].score == pytest.approx(g[0].score, abs=1e-5)


@FAST
@given(seeds, sources, st.integers(2, 5), st.sampled_from([0.6, 1.0, 2.0]))
def test_nbest_is_sorted_by_score_and_distinct(seed, srcs, k, lenpen):
    hyps = beam_search(
        model_for(seed), collate_sources(srcs, CPU), SearchConfig(beam=k, nbest=k, lenpen=lenpen, max_len_b=8)
    )
    for nbest in hyps:
        assert len(nbest) == k
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in nbest}) == k
        for h in nbest:  # the score is the length-normalised sum of the positional scores
            assert h.score == pytest.approx(
                sum(h.positional_scores) / (len(h.tokens) + 1) ** lenpen, abs=1e-5
            )


@FAST
@given(seeds, sources, st.sampled_from([1, 2, 4]), st.sampled_from(["post_ln", "pre_ln", "admin"]))
def test_cached_equals_uncached(seed, srcs, k, residual):
    model, src = model_for(seed, residual), collate_sources(srcs, CPU)
    cached = generate(model, src, SearchConfig(beam=k, nbest=k, max_len_b=8))
    plain = generate(model, src, SearchConfig(beam=k, nbest=k, max_len_b=8, use_cache=False))
    for a, b in zip(cached, plain, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@FAST
@given(seeds, sentence, st.lists(sentence, min_size=1, max_size=3), st.sampled_from([1, 3]))
def test_padding_never_changes_the_output(seed, alone, others, k):
    """A sentence decoded alone equals the same sentence in a batch padded to longer ones."""
    model = model_for(seed)
    cfg = SearchConfig(beam=k, nbest=k, max_len_a=1.0, max_len_b=3)
    single = generate(model, collate_sources([alone], CPU), cfg)[0]
    longer = [s + [4] * 5 for s in others]  # every other sentence is longer: ``alone`` gets padded
    batched = generate(model, collate_sources([*longer, alone], CPU), cfg)[-1]
    assert [h.tokens for h in batched] == [h.tokens for h in single]
    assert [h.score for h in batched] == pytest.approx([h.score for h in single], abs=1e-5)
