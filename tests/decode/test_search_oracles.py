"""Beam search against a slow reference on models where the edge cases are common: a 3-word
vocabulary, where ``</s>`` often lands among candidates k..2k-1 of a step (finalised only from the
best k, fairseq's rule), and a model that always wants to stop, where the output length is exactly
``min_len``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.decode.search import BOS, EOS, PAD, SearchConfig, beam_search, generate
from pipeline_lib.decode.translator import collate_sources
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel, build_model

SMALL_V = 7  # 4 specials + 3 words: </s> is among the 2k candidates of most steps


def tiny_model(vocab: int, seed: int) -> TransformerModel:
    torch.manual_seed(seed)
    cfg = ModelConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, encoder_layers=1, decoder_layers=1, d_model=16,
        ffn_dim=32, heads=2, dropout=0.0,
    )  # fmt: skip
    return build_model(cfg).eval()


def reference_beam(
    model: TransformerModel, src: list[int], k: int, lenpen: float, max_len: int, min_len: int
) -> list[tuple[list[int], float]]:
    """fairseq's beam search the slow, obvious way: every (beam, token) candidate of a step in one
    sorted list; </s> is finalised only from its best k, the best k others continue."""
    vocab = model.config.tgt_vocab_size
    with torch.no_grad():
        enc = model.encode(torch.tensor([src + [EOS]]))
    beams: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    for step in range(max_len + 1):
        cands = []
        for bi, (toks, cum) in enumerate(beams if step else beams[:1]):
            with torch.no_grad():
                logits = model.decode(torch.tensor([[BOS] + toks]), enc)[0, -1].float()
            lp = F.log_softmax(logits, dim=-1)
            lp[PAD] = lp[BOS] = -math.inf
            if step < min_len:
                lp[EOS] = -math.inf
            if step == max_len:
                keep = lp[EOS].item()
                lp[:] = -math.inf
                lp[EOS] = keep
            cands += [(cum + lp[t].item(), bi, t) for t in range(vocab)]
        cands.sort(key=lambda c: -c[0])  # stable: ties keep (beam, token) order, as topk does here
        top = cands[: 2 * k]
        for score, bi, t in top[:k]:
            if t == EOS and score > -math.inf and len(finished) < k:
                finished.append((beams[bi][0], score / (step + 1) ** lenpen))
        if len(finished) >= k or step == max_len:
            break
        beams = [(beams[bi][0] + [t], s) for s, bi, t in top if t != EOS][:k]
    return sorted(finished, key=lambda f: -f[1])


@pytest.mark.parametrize(("k", "lenpen"), [(2, 1.0), (3, 0.6), (3, 1.5)])
def test_small_vocabulary_beam_matches_reference(k: int, lenpen: float) -> None:
    """Catches finalising </s> from all 2k candidates: with 3 words, </s> sits in candidates k..2k-1
    at most steps, and finalising it there changes the n-best lists."""
    torch.set_num_threads(1)
    checked = 0
    for seed in range(4):
        model = tiny_model(SMALL_V, seed)
        gen = torch.Generator().manual_seed(seed)
        sources = [torch.randint(4, SMALL_V, (int(n),), generator=gen).tolist() for n in (1, 3, 5, 8)]
        got = beam_search(
            model,
            collate_sources(sources, torch.device("cpu")),
            SearchConfig(beam=k, nbest=k, lenpen=lenpen, max_len_b=6, min_len=1),
        )
        for src, hyps in zip(sources, got, strict=True):
            want = reference_beam(model, src, k, lenpen, max_len=6, min_len=1)
            assert [h.tokens for h in hyps] == [w[0] for w in want], (seed, src)
            assert [h.score for h in hyps] == pytest.approx([w[1] for w in want], abs=1e-5)
            checked += 1
    assert checked == 16


def eager_to_stop(model: TransformerModel) -> TransformerModel:
    """The output layer adds 30 to the </s> logit: the model stops as early as it may."""

    def boost(_module: torch.nn.Module, _inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        output = output.clone()
        output[..., EOS] += 30.0
        return output

    model.output_projection.register_forward_hook(boost)
    return model


@pytest.mark.parametrize("min_len", [0, 1, 2, 5])
@pytest.mark.parametrize(
    "search",
    [{"beam": 4, "nbest": 4}, {"beam": 1}, {"beam": 1, "nbest": 3, "sampling": True}],
    ids=["beam", "greedy", "sampling"],
)
def test_output_length_is_exactly_min_len_when_the_model_wants_to_stop(min_len: int, search: dict) -> None:
    """</s> is allowed from ``min_len`` tokens on, not one later: min_len 1 allows one-token outputs."""
    torch.set_num_threads(1)
    model = eager_to_stop(tiny_model(12, seed=1))
    src = collate_sources([[5, 6, 7], [8], [4, 9, 10, 11, 5, 6]], torch.device("cpu"))
    cfg = SearchConfig(min_len=min_len, max_len_b=10, **search)
    hyps = generate(model, src, cfg, torch.Generator().manual_seed(0))
    assert [len(nbest[0].tokens) for nbest in hyps] == [min_len] * 3
    if search.get("sampling"):  # every sample stops at the first step it may
        assert {len(h.tokens) for nbest in hyps for h in nbest} == {min_len}
