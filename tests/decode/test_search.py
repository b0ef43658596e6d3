"""Search correctness on small random models: cache vs no cache, beam 1 vs greedy, a brute-force
reference beam search, rescoring, n-best order, input order, length limits, seeded sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.cpu import onednn as linear_module
from pipeline_lib.cpu.onednn import onednn_available
from pipeline_lib.decode.search import (
    BOS,
    EOS,
    PAD,
    SearchConfig,
    beam_search,
    fill_holes,
    parent_slots,
    sample_search,
    shared_steps,
)
from pipeline_lib.decode.translator import collate_sources, decode_cpu_gemm, plan_decode_batches, translate
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.linear import Linear
from pipeline_lib.model.transformer import build_model
from tests.decode.test_search_oracles import reference_beam

V = 40


def _model(residual: str = "post_ln", seed: int = 0, **kw):
    torch.manual_seed(seed)
    cfg = ModelConfig(
        src_vocab_size=V, tgt_vocab_size=V, encoder_layers=2, decoder_layers=2, d_model=32,
        ffn_dim=64, heads=4, dropout=0.1, residual=residual, **kw,
    )  # fmt: skip
    return build_model(cfg).eval()


def _sources(n: int = 7, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [rng.integers(4, V, size=int(rng.integers(1, 12))).tolist() for _ in range(n)]


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(2)


@pytest.mark.parametrize("residual", ["post_ln", "pre_ln", "admin", "dlcl"])
def test_cached_equals_uncached(residual):
    model = _model(residual)
    src = collate_sources(_sources(), torch.device("cpu"))
    for kw in ({"beam": 4, "nbest": 4}, {"beam": 1}):
        cached = beam_search(model, src, SearchConfig(max_len_b=12, use_cache=True, **kw))
        plain = beam_search(model, src, SearchConfig(max_len_b=12, use_cache=False, **kw))
        for a, b in zip(cached, plain, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b]
            for ha, hb in zip(a, b, strict=True):
                assert ha.score == pytest.approx(hb.score, abs=1e-5)
                np.testing.assert_allclose(ha.positional_scores, hb.positional_scores, atol=1e-5)
    greedy_c = sample_search(model, src, SearchConfig(beam=1, max_len_b=12, use_cache=True))
    greedy_p = sample_search(model, src, SearchConfig(beam=1, max_len_b=12, use_cache=False))
    assert [g[0].tokens for g in greedy_c] == [g[0].tokens for g in greedy_p]


def test_parent_slots_keep_each_parents_best_child_in_its_row():
    rng = np.random.default_rng(0)
    k = 5
    parents = torch.tensor(rng.integers(0, k, size=(200, k)))
    perm = parent_slots(parents)
    assert torch.equal(perm.sort(dim=1).values, torch.arange(k).expand(200, k))  # a permutation per block
    placed = parents.gather(1, perm)  # parent of the survivor now in each row
    for row_parents, ranks, par in zip(placed.tolist(), perm.tolist(), parents.tolist(), strict=True):
        for p in set(par):
            assert row_parents[p] == p and ranks[p] == par.index(p)  # best child in the parent's row
        moved = [r for r in range(k) if row_parents[r] != r]
        assert moved == sorted(set(range(k)) - set(par))  # the others fill the childless rows...
        assert [ranks[r] for r in moved] == sorted(ranks[r] for r in moved)  # ...in rank order


def test_fill_holes_moves_only_the_survivors_beyond_the_new_end():
    rng = np.random.default_rng(0)
    for _ in range(200):
        done = torch.tensor(rng.random(int(rng.integers(1, 12))) < 0.4)
        order = fill_holes(done).tolist()
        survivors = (~done).nonzero().squeeze(1).tolist()
        assert sorted(order) == survivors  # every survivor, once
        n = len(survivors)
        assert all(order[i] == i for i in survivors if i < n)  # those still inside stay put
        movers = [order[i] for i in range(n) if done[i]]
        assert movers == sorted(i for i in survivors if i >= n)  # the rest fill the holes, in order


def test_shared_steps_count_common_first_tokens_within_a_sentence():
    # two sentences of two beams; inputs so far: <s> + 3 tokens
    prefixes = torch.tensor([[1, 5, 6, 7], [1, 5, 6, 9], [1, 8, 6, 7], [1, 5, 6, 7]])
    order = torch.tensor([1, 1, 3, 3])  # rows 0 and 2 take their sibling's history
    assert shared_steps(prefixes, order, group=2).tolist() == [3, 4, 1, 4]
    # sentence 0 leaves; row 0 now takes sentence 1's beams: identical tokens, another source
    assert shared_steps(prefixes, torch.tensor([3, 2]), group=2).tolist() == [0, 0]
    assert shared_steps(prefixes, torch.tensor([2, 3]), group=1).tolist() == [0, 0]


def test_beam_one_equals_greedy():
    model = _model()
    src = collate_sources(_sources(9, seed=1), torch.device("cpu"))
    for lenpen in (1.0, 0.6):
        beam = beam_search(model, src, SearchConfig(beam=1, lenpen=lenpen, max_len_b=15))
        greedy = sample_search(model, src, SearchConfig(beam=1, lenpen=lenpen, max_len_b=15))
        assert [b[0].tokens for b in beam] == [g[0].tokens for g in greedy]
        for b, g in zip(beam, greedy, strict=True):
            assert b[0].score == pytest.approx(g[0].score, abs=1e-5)


def _rescore(model, src: list[int], hyp: list[int]) -> list[float]:
    """Teacher-forced log-probs of hyp + </s> from one full forward pass."""
    s = torch.tensor([src + [EOS]])
    prev = torch.tensor([[BOS] + hyp])
    with torch.no_grad():
        lp = F.log_softmax(model(s, prev)[0].float(), dim=-1)
    return lp.gather(1, torch.tensor(hyp + [EOS]).unsqueeze(1)).squeeze(1).tolist()


@pytest.mark.parametrize(("k", "lenpen", "min_len"), [(3, 1.0, 1), (4, 0.6, 3), (2, 2.0, 0)])
def test_batched_beam_matches_reference_beam(k, lenpen, min_len):
    model = _model(seed=3)
    sources = _sources(5, seed=2)
    max_len = 6
    hyps = beam_search(
        model,
        collate_sources(sources, torch.device("cpu")),
        SearchConfig(beam=k, nbest=k, lenpen=lenpen, max_len_b=max_len, min_len=min_len),
    )
    for src, got in zip(sources, hyps, strict=True):
        want = reference_beam(model, src, k, lenpen, max_len, min_len)
        assert [h.tokens for h in got] == [w[0] for w in want]
        for h, (_, score) in zip(got, want, strict=True):
            assert h.score == pytest.approx(score, abs=1e-4)


def test_scores_match_teacher_forced_rescoring_and_nbest_is_sorted():
    model = _model(seed=5)
    sources = _sources(6, seed=4)
    hyps = translate(model, sources, SearchConfig(beam=5, nbest=5, lenpen=0.8, max_len_b=10), progress=False)
    for src, nbest in zip(sources, hyps, strict=True):
        assert len(nbest) == 5
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in nbest}) == 5  # distinct hypotheses
        for h in nbest:
            rescored = _rescore(model, src, h.tokens)
            np.testing.assert_allclose(h.positional_scores, rescored, atol=1e-4)
            assert h.score == pytest.approx(sum(rescored) / (len(h.tokens) + 1) ** 0.8, abs=1e-4)


def test_output_in_input_order_whatever_the_batching():
    model = _model(seed=6)
    sources = _sources(23, seed=5)
    cfg = SearchConfig(beam=3, max_len_a=1.0, max_len_b=3)
    one_by_one = [translate(model, [s], cfg, batch_size=1, progress=False)[0][0].tokens for s in sources]
    for max_tokens, batch_size in ((30, None), (None, 4), (10_000, 100)):
        batched = translate(model, sources, cfg, max_tokens=max_tokens, batch_size=batch_size, progress=False)
        assert [h[0].tokens for h in batched] == one_by_one
    # the plan really sorts: longest first, every index exactly once
    lengths = [len(s) + 1 for s in sources]
    plan = plan_decode_batches(lengths, 30, None)
    flat = np.concatenate(plan)
    assert sorted(flat.tolist()) == list(range(len(sources)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    assert all(len(b) * max(lengths[i] for i in b) <= 30 for b in plan)


def test_worker_threads_give_the_same_output_and_restore_the_thread_count():
    model = _model(seed=10)
    sources = _sources(21, seed=9)
    searches = (
        SearchConfig(beam=4, nbest=2, max_len_a=1.0, max_len_b=3),
        SearchConfig(beam=1, nbest=3, sampling=True, sampling_topk=5, max_len_b=8),
    )
    for cfg in searches:
        one = translate(model, sources, cfg, batch_size=4, seed=3, progress=False)
        threads_before = torch.get_num_threads()
        many = translate(model, sources, cfg, batch_size=4, seed=3, progress=False, workers=3)
        assert torch.get_num_threads() == threads_before
        assert [[h.tokens for h in n] for n in many] == [[h.tokens for h in n] for n in one]
        assert [h.score for n in many for h in n] == pytest.approx([h.score for n in one for h in n])
    with pytest.raises(ConfigError, match="--workers"):
        translate(model, sources, searches[0], progress=False, workers=0)


@pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")
def test_onednn_decoding_matches_mkl_and_routes_every_linear_layer(monkeypatch):
    model = _model(seed=11)
    sources = _sources(21, seed=10)
    cfg = SearchConfig(beam=4, nbest=2, max_len_a=1.0, max_len_b=5)
    run = dict(batch_size=8, progress=False)
    mkl = translate(model, sources, cfg, cpu_gemm="mkl", **run)
    weights = []
    real = linear_module.onednn_matmul
    monkeypatch.setattr(
        linear_module, "onednn_matmul", lambda *a: weights.append(a[1].data_ptr()) or real(*a)
    )
    onednn = translate(model, sources, cfg, cpu_gemm="onednn", workers=2, **run)
    assert [[h.tokens for h in n] for n in onednn] == [[h.tokens for h in n] for n in mkl]
    assert [h.score for n in onednn for h in n] == pytest.approx([h.score for n in mkl for h in n], rel=1e-5)
    linears = {m.weight.data_ptr() for m in model.modules() if isinstance(m, Linear)}
    assert model.output_projection.weight.data_ptr() in linears
    assert set(weights) == linears  # the output layer too: its product is the largest of a step
    calls = len(weights)
    # auto: this model is too small for oneDNN to pay (d=32, 8 sentences x beam 4)
    translate(model, sources, cfg, cpu_gemm="auto", **run)
    assert len(weights) == calls
    with pytest.raises(ConfigError, match="--cpu-gemm onednn"):
        translate(model, sources, cfg, cpu_gemm="onednn", bf16=True, **run)
    with pytest.raises(ConfigError, match="openblas"):
        translate(model, sources, cfg, cpu_gemm="openblas", **run)


def test_auto_cpu_gemm_for_decoding_counts_sentences_times_beam():
    cfg_model = ModelConfig(
        src_vocab_size=V, tgt_vocab_size=V, encoder_layers=1, decoder_layers=1, d_model=256
    )
    model = build_model(cfg_model)
    fast = (
        "onednn"
        if torch.backends.cpu.get_cpu_capability().startswith("AVX512") and onednn_available()
        else "mkl"
    )
    beam4, samples5 = SearchConfig(beam=4), SearchConfig(beam=1, nbest=5, sampling=True)
    batches = lambda *sizes: [np.arange(n) for n in sizes]  # noqa: E731
    assert decode_cpu_gemm(model, "auto", batches(64, 10), beam4, bf16=False) == fast  # 256 rows
    assert decode_cpu_gemm(model, "auto", batches(63, 63), beam4, bf16=False) == "mkl"  # 252 rows
    assert decode_cpu_gemm(model, "auto", batches(60), samples5, bf16=False) == fast  # 300 rows
    assert decode_cpu_gemm(model, "auto", batches(64), beam4, bf16=True) == "mkl"  # autocast's products
    assert decode_cpu_gemm(model, "mkl", batches(128), beam4, bf16=False) == "mkl"


def test_length_limits():
    model = _model(seed=7)
    sources = _sources(8, seed=6)
    src = collate_sources(sources, torch.device("cpu"))
    for search in (beam_search, sample_search):
        beam = 3 if search is beam_search else 1
        hyps = search(model, src, SearchConfig(beam=beam, max_len_a=0.5, max_len_b=2))
        for s, h in zip(sources, hyps, strict=True):
            assert 1 <= len(h[0].tokens) <= int(0.5 * (len(s) + 1) + 2)
        fixed = search(model, src, SearchConfig(beam=beam, min_len=7, max_len_b=7))
        assert all(len(h[0].tokens) == 7 for h in fixed)
    no_unk = beam_search(model, src, SearchConfig(beam=4, nbest=4, max_len_b=8, no_unk=True))
    assert all(3 not in h.tokens for nbest in no_unk for h in nbest)


def test_sampling_is_seeded_and_varied():
    model = _model(seed=8)
    sources = _sources(5, seed=7)
    for topk in (-1, 5):
        cfg = SearchConfig(beam=1, nbest=4, sampling=True, sampling_topk=topk, temperature=1.5, max_len_b=10)
        a = translate(model, sources, cfg, seed=11, progress=False)
        b = translate(model, sources, cfg, seed=11, progress=False)
        c = translate(model, sources, cfg, seed=12, progress=False)
        toks = [[h.tokens for h in n] for n in a]
        assert toks == [[h.tokens for h in n] for n in b]
        assert toks != [[h.tokens for h in n] for n in c]
        assert all(len(n) == 4 for n in a)
        assert any(len({tuple(t) for t in n}) > 1 for n in toks)  # samples differ within a sentence
        for n in a:
            assert [h.score for h in n] == sorted((h.score for h in n), reverse=True)


def test_topk_sampling_stays_in_topk():
    model = _model(seed=9)
    src = collate_sources([[5, 6, 7]], torch.device("cpu"))
    cfg = SearchConfig(beam=1, nbest=32, sampling=True, sampling_topk=2, min_len=1, max_len_b=1)
    gen = torch.Generator().manual_seed(0)
    hyps = sample_search(model, src, cfg, gen)[0]
    with torch.no_grad():
        enc = model.encode(src)
        lp = model.decode(torch.tensor([[BOS]]), enc)[0, -1]
    lp[[PAD, BOS, EOS]] = -math.inf  # what step 0 allows with min_len=1
    allowed = set(lp.topk(2).indices.tolist())
    assert {h.tokens[0] for h in hyps} <= allowed


def test_bad_search_flags():
    with pytest.raises(ConfigError, match="--nbest"):
        SearchConfig(beam=2, nbest=3)
    with pytest.raises(ConfigError, match="--temperature"):
        SearchConfig(temperature=0)
    with pytest.raises(ConfigError, match="--sampling-topk"):
        SearchConfig(sampling_topk=5)
