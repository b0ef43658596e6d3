"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/decode/search.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.decode.search import BOS, EOS, UNK, SearchConfig, generate
from pipeline_lib.model import build_model
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel

# -- decoding search (pipeline_lib/decode/search.py) ---------------------------------------------


def _search_model(max_positions: int = 1024) -> TransformerModel:
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=24, tgt_vocab_size=24, encoder_layers=1, decoder_layers=1, d_model=16,
        ffn_dim=32, heads=2, dropout=0.0, max_positions=max_positions,
    )  # fmt: skip
    return build_model(cfg).eval()


def _teacher_forced(
    model: TransformerModel, src: torch.Tensor, hyp: list[int], temperature: float
) -> list[float]:
    """Log-probs of hyp + </s> from one uncached forward pass over the tempered logits."""
    prev = torch.tensor([[BOS, *hyp]])
    with torch.no_grad():
        logits = model.decode(prev, model.encode(src[:1]))[0].float() / temperature
    lp = F.log_softmax(logits, dim=-1)
    return lp.gather(1, torch.tensor([*hyp, EOS]).unsqueeze(1)).squeeze(1).tolist()


@pytest.mark.parametrize("temperature", [0.5, 2.0])
@pytest.mark.parametrize(("beam", "use_cache"), [(1, True), (2, True), (2, False)])
def test_search_scores_tokens_with_the_tempered_distribution(
    temperature: float, beam: int, use_cache: bool
) -> None:
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    cfg = SearchConfig(beam=beam, temperature=temperature, max_len_b=5, use_cache=use_cache)
    hyp = generate(model, src, cfg)[0][0]
    rescored = _teacher_forced(model, src, hyp.tokens, temperature)
    assert hyp.positional_scores == pytest.approx(rescored, abs=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_negative_unkpen_makes_unk_win_by_that_margin(beam: int) -> None:
    # fairseq's --unkpen is subtracted from <unk>'s log-prob: -50 makes every token <unk>.
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    hyp = generate(model, src, SearchConfig(beam=beam, unkpen=-50.0, min_len=3, max_len_b=3))[0][0]
    assert hyp.tokens == [UNK, UNK, UNK]
    plain = _teacher_forced(model, src, hyp.tokens, 1.0)
    assert hyp.positional_scores[:3] == pytest.approx([lp + 50.0 for lp in plain[:3]], abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_output_length_is_capped_by_the_models_positions(beam: int) -> None:
    # max_len_b far beyond the model: the decoder input [bos] + tokens fills max_positions exactly.
    model = _search_model(max_positions=6)
    src = torch.tensor([[5, 9, EOS]])
    hyps = generate(model, src, SearchConfig(beam=beam, nbest=beam, min_len=50, max_len_b=50))[0]
    assert [len(h.tokens) for h in hyps] == [5] * beam


@pytest.mark.parametrize("beam", [1, 3])
def test_max_len_zero_gives_the_empty_hypothesis(beam: int) -> None:
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    hyp = generate(model, src, SearchConfig(beam=beam, max_len_b=0))[0][0]
    assert hyp.tokens == []
    assert hyp.positional_scores == pytest.approx(_teacher_forced(model, src, [], 1.0), abs=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_max_len_a_scales_with_each_source_length(beam: int) -> None:
    # min_len beyond the limit: every output is exactly floor(a * src_len + b), src_len counting </s>
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS, 0, 0, 0, 0, 0, 0], [5, 9, 7, 8, 6, 5, 9, 7, 8, EOS]])
    hyps = generate(model, src, SearchConfig(beam=beam, max_len_a=0.5, max_len_b=1, min_len=50))
    assert [len(h[0].tokens) for h in hyps] == [3, 6]
