"""Translate a list of id sequences: length-sorted batches, device placement, bf16, progress.

Sentences are sorted by source length (longest first, so an out-of-memory batch shows up at the
start) and batched by ``max_tokens`` (sentences x longest source, ``</s>`` included) and
``batch_size``; hypotheses come back in input order.

fp32 products on a CPU run on MKL or oneDNN (``cpu_gemm``, see pipeline_lib.model.linear); auto
picks oneDNN on AVX-512 CPUs for d >= 256 and batches of >= 256 rows (sentences x beam).

On a CPU, ``workers`` > 1 decodes that many batches at once, each on one intra-op thread (the
``inter_threads`` x ``intra_threads`` split of CTranslate2): the per-step matrices of beam search are
small, so one thread per batch keeps every core busy where OpenMP threads inside one small matmul
mostly wait. torch releases the GIL inside its kernels. Results never depend on the worker count:
batches are fixed before decoding and sampling draws from a generator seeded per batch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from tqdm import tqdm

from pipeline_lib.cpu.onednn import AUTO_MIN_DECODE_ROWS, CPU_GEMMS, resolve_cpu_gemm, set_cpu_gemm
from pipeline_lib.cpu.threads import single_intra_op_thread
from pipeline_lib.decode.search import EOS, PAD, Hypothesis, SearchConfig, generate
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.attention import avoid_cudnn_attention
from pipeline_lib.model.transformer import TransformerModel

log = logging.getLogger(__name__)


def plan_decode_batches(
    lengths: Sequence[int], max_tokens: int | None, batch_size: int | None
) -> list[np.ndarray]:
    """Index arrays of length-sorted batches. ``lengths`` include the source </s>.

    A sentence longer than ``max_tokens`` on its own still gets a batch of one.
    """
    if max_tokens is None and batch_size is None:
        raise ConfigError("set --max-tokens or --batch-size")
    sizes = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-sizes, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    for pos in range(1, len(order) + 1):
        count = pos - start + 1
        if pos < len(order):
            over_tokens = max_tokens is not None and count * int(sizes[order[start]]) > max_tokens
            over_sents = batch_size is not None and count > batch_size
            if not (over_tokens or over_sents):
                continue
        batches.append(order[start:pos])
        start = pos
    return batches


def collate_sources(sources: Sequence[Sequence[int]], device: torch.device) -> torch.Tensor:
    """(B, S) ids + </s>, right-padded."""
    width = max(len(s) for s in sources) + 1
    out = np.full((len(sources), width), PAD, dtype=np.int64)
    for i, s in enumerate(sources):
        out[i, : len(s)] = s
        out[i, len(s)] = EOS
    return torch.from_numpy(out).to(device)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name}: CUDA is not available on this machine")
    return device


def check_cpu_gemm(choice: str, device: torch.device, bf16: bool) -> None:
    """--cpu-gemm onednn is for fp32 decoding on a CPU."""
    if choice not in CPU_GEMMS:
        raise ConfigError(f"--cpu-gemm {choice!r} is not one of {', '.join(CPU_GEMMS)}")
    if choice == "onednn" and (device.type != "cpu" or bf16):
        raise ConfigError("--cpu-gemm onednn is for fp32 decoding on a CPU (--device cpu, no --bf16)")


def decode_cpu_gemm(
    model: TransformerModel, choice: str, batches: Sequence[np.ndarray], cfg: SearchConfig, bf16: bool
) -> str:
    """The CPU matmul backend for decoding ``batches``: its products have sentences x beam rows."""
    if bf16:
        return "mkl"  # autocast's bf16 products; oneDNN's path is fp32 only
    per_sentence = cfg.nbest if cfg.sampling else cfg.beam
    rows = max(len(idx) for idx in batches) * per_sentence
    return resolve_cpu_gemm(choice, model.config.d_model, rows, AUTO_MIN_DECODE_ROWS)


def translate(
    model: TransformerModel,
    sources: Sequence[Sequence[int]],
    cfg: SearchConfig,
    *,
    max_tokens: int | None = 6000,
    batch_size: int | None = 128,
    bf16: bool = False,
    seed: int = 1,
    progress: bool = True,
    workers: int = 1,
    cpu_gemm: str = "auto",
) -> list[list[Hypothesis]]:
    """n-best lists for ``sources`` (id lists without </s>), in input order. On a CPU this routes the
    model's linear layers to ``cpu_gemm``'s matmuls (``set_cpu_gemm``), and they stay routed."""
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    device = next(model.parameters()).device
    check_cpu_gemm(cpu_gemm, device, bf16)
    if device.type != "cpu":
        workers = 1  # one GPU stream: concurrency comes from the batch
    if device.type == "cuda":
        avoid_cudnn_attention()
    model.eval()
    results: list[list[Hypothesis]] = [[] for _ in sources]
    if not sources:
        return results
    batches = plan_decode_batches([len(s) + 1 for s in sources], max_tokens, batch_size)
    if device.type == "cpu":
        gemm = decode_cpu_gemm(model, cpu_gemm, batches, cfg, bf16)
        set_cpu_gemm(model, gemm)
        log.info("CPU matmuls: %s", gemm)
    bar = tqdm(total=len(sources), unit="sent", desc="translate", disable=not progress or None)
    lock = threading.Lock()

    def run_batch(number: int, idx: np.ndarray) -> None:
        # Per-batch generator: samples do not depend on which worker ran the batch, or when.
        generator = torch.Generator(device=device).manual_seed(seed + number) if cfg.sampling else None
        autocast = (
            torch.autocast(device_type=device.type, dtype=torch.bfloat16)
            if bf16
            else contextlib.nullcontext()
        )
        src = collate_sources([sources[i] for i in idx], device)
        with autocast:
            nbests = generate(model, src, cfg, generator)
        with lock:
            for i, hyps in zip(idx.tolist(), nbests, strict=True):
                results[i] = hyps
            bar.update(len(idx))

    with bar:
        if workers == 1:
            for number, idx in enumerate(batches):
                run_batch(number, idx)
        else:
            with single_intra_op_thread(), ThreadPoolExecutor(workers) as pool:
                # list(): re-raise the first worker error here
                list(pool.map(run_batch, range(len(batches)), batches))
    return results
