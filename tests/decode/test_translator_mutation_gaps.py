"""Mutation gaps of translator (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: batches and tensors worked out by hand, and every sentence decoded
alone (no batching, no sorting) as the reference for the batched, reordered run."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import torch

from pipeline_lib.decode import translator
from pipeline_lib.decode.search import EOS, PAD, Hypothesis, SearchConfig, generate
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


# translate() around the search: `generate` and the CPU matmul choice replaced by recorders, so each
# test sees the batches, seeds, threads and precision translate() hands the search, worked out by hand.


class Recorder:
    """Stands in for search.generate: one hypothesis per row (its first source id), and what it saw."""

    def __init__(self, delay: float = 0.0, drop_last: bool = False) -> None:
        self.calls: list[dict] = []
        self.delay, self.drop_last = delay, drop_last
        self.active = self.most_active = 0
        self.lock = threading.Lock()

    def __call__(self, model, src, cfg, generator):
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        time.sleep(self.delay)
        self.calls.append(
            {
                "rows": src.tolist(),
                "seed": None if generator is None else generator.initial_seed(),
                "on_main_thread": threading.current_thread() is threading.main_thread(),
                "bf16": torch.is_autocast_enabled("cpu")
                and torch.get_autocast_dtype("cpu") == torch.bfloat16,
            }
        )
        with self.lock:
            self.active -= 1
        rows = src.tolist()[:-1] if self.drop_last else src.tolist()
        return [[Hypothesis(tokens=[row[0]], score=0.0, positional_scores=[0.0])] for row in rows]


@pytest.fixture
def recorder(monkeypatch):
    record = Recorder()
    monkeypatch.setattr(translator, "generate", record)
    return record


SAMPLE = SearchConfig(beam=1, sampling=True, nbest=1, max_len_b=2)


def test_default_limits_seed_thread_and_precision(recorder) -> None:
    # 129 one-token sentences: the default 128 sentences a batch leaves one; batch k samples from a
    # generator seeded 1 + k (the default seed); the calling thread runs them; no bf16 autocast
    sources = [[4 + i % 8] for i in range(129)]
    got = translate(model(), sources, SAMPLE, progress=False)
    assert [len(call["rows"]) for call in recorder.calls] == [128, 1]
    assert [call["seed"] for call in recorder.calls] == [1, 2]
    assert all(call["on_main_thread"] for call in recorder.calls)
    assert not any(call["bf16"] for call in recorder.calls)
    assert [nbest[0].tokens for nbest in got] == sources


def test_default_token_limit_is_6000(recorder) -> None:
    # 352 tokens + </s> = 353 a sentence: 17 x 353 = 6,001 is over 6,000, 16 x 353 = 5,648 is not
    translate(model(), [[5] * 352 for _ in range(17)], SearchConfig(beam=1, max_len_b=1), progress=False)
    assert [len(call["rows"]) for call in recorder.calls] == [16, 1]
    assert [call["seed"] for call in recorder.calls] == [None, None]  # beam search draws nothing


def test_token_limit_counts_the_end_of_sentence(recorder) -> None:
    # 6 ids + </s> = 7: two fit 14 tokens (2 x 7); one id more each and they would not (2 x 8 = 16)
    translate(
        model(), [[5] * 6, [6] * 6], SearchConfig(beam=1), max_tokens=14, batch_size=None, progress=False
    )
    assert [call["rows"] for call in recorder.calls] == [[[5] * 6 + [EOS], [6] * 6 + [EOS]]]


def test_bf16_decodes_under_bf16_autocast(recorder) -> None:
    translate(model(), SOURCES, SearchConfig(beam=1), bf16=True, progress=False)
    assert recorder.calls and all(call["bf16"] for call in recorder.calls)


def test_two_workers_run_batches_two_at_a_time_off_the_calling_thread(monkeypatch) -> None:
    record = Recorder(delay=0.05)
    monkeypatch.setattr(translator, "generate", record)
    got = translate(model(), SOURCES, SAMPLE, batch_size=1, seed=7, progress=False, workers=2)
    assert not any(call["on_main_thread"] for call in record.calls)
    assert record.most_active == 2
    assert sorted(call["seed"] for call in record.calls) == [7, 8, 9, 10, 11]
    assert [nbest[0].tokens for nbest in got] == [[s[0]] for s in SOURCES]


def test_one_worker_given_explicitly_stays_on_the_calling_thread(recorder) -> None:
    translate(model(), SOURCES, SearchConfig(beam=1), batch_size=2, progress=False, workers=1)
    assert len(recorder.calls) == 3 and all(call["on_main_thread"] for call in recorder.calls)


def test_a_search_that_loses_a_sentence_is_an_error(monkeypatch) -> None:
    monkeypatch.setattr(translator, "generate", Recorder(drop_last=True))
    with pytest.raises(ValueError, match="zip"):
        translate(model(), SOURCES, SearchConfig(beam=1), batch_size=2, progress=False)


def test_onednn_with_bf16_is_refused_before_decoding(recorder) -> None:
    with pytest.raises(ConfigError, match="fp32 decoding on a CPU"):
        translate(model(), SOURCES, SearchConfig(beam=1), cpu_gemm="onednn", bf16=True, progress=False)
    assert recorder.calls == []


@pytest.mark.parametrize(
    "cfg, bf16, asked",
    [
        # rows of the largest batch (2 sentences) x beam 3; x nbest 4 when sampling; none under bf16
        (SearchConfig(beam=3), False, [("auto", 16, 6, 256)]),
        (SearchConfig(beam=1, sampling=True, nbest=4), False, [("auto", 16, 8, 256)]),
        (SearchConfig(beam=3), True, []),
    ],
)
def test_cpu_matmul_choice_and_routing(recorder, monkeypatch, caplog, cfg, bf16, asked) -> None:
    questions, routed = [], []
    monkeypatch.setattr(translator, "resolve_cpu_gemm", lambda *a: questions.append(a) or "onednn")
    monkeypatch.setattr(translator, "set_cpu_gemm", lambda m, gemm: routed.append((m, gemm)))
    m = model()
    with caplog.at_level(logging.INFO, logger=translator.log.name):
        translate(m, SOURCES, cfg, batch_size=2, bf16=bf16, progress=False)
    assert questions == asked
    gemm = "mkl" if bf16 else "onednn"
    assert routed == [(m, gemm)]
    assert f"CPU matmuls: {gemm}" in caplog.messages


def test_equal_lengths_keep_their_input_order() -> None:
    # numpy's default sort is not stable for this many ties; the batches (and so the sampling seeds)
    # must not depend on that. Python's sort is stable: the oracle.
    lengths = [5] * 20 + [7] * 20 + [5] * 20
    (only,) = plan_decode_batches(lengths, None, 60)
    assert only.tolist() == sorted(range(60), key=lambda i: -lengths[i])


class FakeBar:
    """Stands in for tqdm: what translate() asks of its progress bar."""

    made: list[FakeBar] = []

    def __init__(self, **kwargs) -> None:
        self.kwargs, self.updates = kwargs, []
        FakeBar.made.append(self)

    def update(self, n: int) -> None:
        self.updates.append(n)

    def __enter__(self) -> FakeBar:
        return self

    def __exit__(self, *exc) -> None:
        return None


@pytest.mark.parametrize("progress, disable", [(True, None), (False, True)])
def test_progress_counts_every_sentence_once(recorder, monkeypatch, progress: bool, disable) -> None:
    # None: tqdm's own choice (shown on a terminal, hidden in a log); True: never shown
    FakeBar.made = []
    monkeypatch.setattr(translator, "tqdm", FakeBar)
    translate(model(), SOURCES, SearchConfig(beam=1), batch_size=2, progress=progress)
    (bar,) = FakeBar.made
    assert bar.kwargs["total"] == len(SOURCES) and bar.kwargs["disable"] is disable
    assert sorted(bar.updates) == [1, 2, 2]  # batches of the longest-first order: 2, 2, 1


def test_progress_is_shown_by_default(recorder, monkeypatch) -> None:
    FakeBar.made = []
    monkeypatch.setattr(translator, "tqdm", FakeBar)
    translate(model(), SOURCES, SearchConfig(beam=1))
    assert FakeBar.made[0].kwargs["disable"] is None


def test_cpu_decoding_leaves_the_cuda_attention_switch_alone(recorder) -> None:
    enabled = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        translate(model(), SOURCES, SearchConfig(beam=1), progress=False)
        assert torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(enabled)
