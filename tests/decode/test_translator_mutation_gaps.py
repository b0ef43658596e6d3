"""Mutation gaps of translator (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: batches and tensors worked out by hand, and every sentence decoded
alone (no batching, no sorting) as the reference for the batched, reordered run."""

from __future__ import annotations

import pytest
import torch

from pipeline_lib.decode.search import EOS, PAD, SearchConfig, generate
from pipeline_lib.decode.translator import (
    check_cpu_gemm,
    collate_sources,
    decode_cpu_gemm,
    plan_decode_batches,
    resolve_device,
    translate,
)
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

# Longest first, ties in input order: 1 (7), 3 (7), 2 (5), 0 (3), 4 (2); a batch costs its count x
# its first (longest) length.
LENGTHS = [3, 7, 5, 7, 2]


@pytest.mark.parametrize(
    "max_tokens, batch_size, expected",
    [
        (14, None, [[1, 3], [2, 0], [4]]),  # 2 x 7 = 14 fits; 3 x 5 = 15 does not
        (13, None, [[1], [3], [2, 0], [4]]),
        (5, None, [[1], [3], [2], [0], [4]]),  # each over 5 alone: a batch of one each
        (None, 2, [[1, 3], [2, 0], [4]]),
        (None, 3, [[1, 3, 2], [0, 4]]),
        (100, 4, [[1, 3, 2, 0], [4]]),
        (15, 3, [[1, 3], [2, 0, 4]]),
    ],
)
def test_decode_batches_by_hand(max_tokens, batch_size, expected) -> None:
    assert [b.tolist() for b in plan_decode_batches(LENGTHS, max_tokens, batch_size)] == expected


def test_decode_batches_need_a_limit_and_cover_nothing_for_no_sentences() -> None:
    with pytest.raises(ConfigError, match="set --max-tokens or --batch-size"):
        plan_decode_batches(LENGTHS, None, None)
    assert plan_decode_batches([], 10, None) == []
    assert [b.tolist() for b in plan_decode_batches([4], 1, None)] == [[0]]


def test_collate_sources_appends_eos_and_pads_right() -> None:
    got = collate_sources([[5, 6, 7], [], [8]], torch.device("cpu"))
    assert got.dtype == torch.int64
    assert got.tolist() == [[5, 6, 7, EOS], [EOS, PAD, PAD, PAD], [8, EOS, PAD, PAD]]


def test_devices() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
        with pytest.raises(ConfigError, match="--device cuda: CUDA is not available on this machine"):
            resolve_device("cuda")


def test_cpu_gemm_choices() -> None:
    cpu = torch.device("cpu")
    with pytest.raises(ConfigError, match="--cpu-gemm 'blas' is not one of auto, mkl, onednn"):
        check_cpu_gemm("blas", cpu, False)
    with pytest.raises(ConfigError, match="fp32 decoding on a CPU"):
        check_cpu_gemm("onednn", cpu, True)
    with pytest.raises(ConfigError, match="fp32 decoding on a CPU"):
        check_cpu_gemm("onednn", torch.device("cuda"), False)
    check_cpu_gemm("onednn", cpu, False)
    check_cpu_gemm("mkl", cpu, True)
    check_cpu_gemm("auto", torch.device("cuda"), True)


def model():
    torch.manual_seed(0)
    return build_model(
        ModelConfig(12, 12, encoder_layers=1, decoder_layers=1, d_model=16, ffn_dim=32, heads=2)
    ).eval()


def test_bf16_decoding_keeps_mkl_and_fp32_follows_the_choice() -> None:
    m = model()
    batches = plan_decode_batches(LENGTHS, None, 2)
    assert decode_cpu_gemm(m, "onednn", batches, SearchConfig(beam=4), bf16=True) == "mkl"
    assert decode_cpu_gemm(m, "mkl", batches, SearchConfig(beam=4), bf16=False) == "mkl"


SOURCES = [[4, 5, 6], [7, 8, 9, 10, 11, 4, 5], [6, 7], [8], [9, 10, 11, 4]]


def alone(m, cfg: SearchConfig, i: int, generator=None):
    return generate(m, collate_sources([SOURCES[i]], torch.device("cpu")), cfg, generator)[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_batched_translation_comes_back_in_input_order(workers: int) -> None:
    m = model()
    cfg = SearchConfig(beam=3, nbest=2, max_len_b=6)
    got = translate(m, SOURCES, cfg, max_tokens=None, batch_size=2, progress=False, workers=workers)
    for i in range(len(SOURCES)):
        expected = alone(m, cfg, i)
        assert [h.tokens for h in got[i]] == [h.tokens for h in expected], i
        assert [h.score for h in got[i]] == pytest.approx([h.score for h in expected], abs=1e-5)


def test_sampling_draws_from_a_generator_seeded_per_batch() -> None:
    m = model()
    cfg = SearchConfig(beam=1, sampling=True, nbest=2, max_len_b=6)
    got = translate(m, SOURCES, cfg, max_tokens=None, batch_size=1, seed=5, progress=False)
    # one sentence a batch, longest first: batch k is sentence order[k], seeded 5 + k
    order = [1, 4, 0, 2, 3]
    for number, i in enumerate(order):
        expected = alone(m, cfg, i, torch.Generator().manual_seed(5 + number))
        assert [h.tokens for h in got[i]] == [h.tokens for h in expected], i


def test_nothing_to_translate_and_bad_workers() -> None:
    m = model()
    assert translate(m, [], SearchConfig(beam=2), progress=False) == []
    with pytest.raises(ConfigError, match="--workers must be >= 1, got 0"):
        translate(m, SOURCES, SearchConfig(beam=2), workers=0, progress=False)


def test_translation_switches_dropout_off() -> None:
    m = model().train()
    translate(m, SOURCES[:1], SearchConfig(beam=2, max_len_b=3), progress=False)
    assert not m.training
