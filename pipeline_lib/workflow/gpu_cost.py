"""GPU-hours a training run will take, from the training rates measured on GPUs (gpu_rates.json).

``gpu_rates.json`` is built by ``bench/gpu_rates.py`` from bench/results/ (a test keeps the two
equal). A run is priced as

    GPU-hours = tokens trained x FLOPs per target token / (MFU x matmul peak) / 3600

with the MFU and matmul peak of one measured row of the card:

* **the row**: same card (by ``card.name``, else by ``card.memory_gb``), the recipe's precision when
  measured (bf16 and fp16 run the same tensor cores: either stands in for the other), then per
  measured width the row of the nearest per-GPU ``max_tokens`` (on a log scale); a width between two
  measured ones takes their MFUs interpolated on log(d_model), one outside them the nearest's;
* **a shape not measured** keeps the row's MFU and scales by FLOPs per token: depth multiplies a
  step's FLOPs and its kernel launches alike, so MFU is set by each kernel's size, the per-GPU batch
  times the width (bench/results: 24L-6L 13.2% vs 6L-6L 10.8% on an H100 at the same batch). A batch
  larger than the row's is priced at the row's MFU (a bound: MFU rises with the batch until the
  kernels saturate), a smaller one optimistically;
* **GPUs**: the GPU-hours do not depend on the count: data parallelism is taken as linear (the
  all-reduce is not measured here; on one node NCCL overlaps it with the backward pass).

The tokens trained: ``max_update`` x tokens per update, or ``max_epoch`` x the training split's target
tokens (binarize's ``meta.json`` when the data is binarized, else the dataset's ``train_target_tokens``;
a back-translation mix adds ``upsample_real`` times the real data and the monolingual lines at
:data:`MEAN_TARGET_LENGTH` tokens each).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

RATES_FILE = Path(__file__).with_name("gpu_rates.json")
MEAN_TARGET_LENGTH = 32  # subword tokens per sentence, as the memory estimate assumes
SIXTEEN_BIT = ("bf16", "fp16")
# fairseq_fp16 (fp16 weights over fp32 masters) runs the same fp16 tensor-core products as autocast
# fp16; until it is timed on a GPU the autocast fp16 rates price it
MEASURED_AS = {"fairseq_fp16": "fp16"}


@dataclass(frozen=True)
class Rate:
    card: str
    memory_gb: int | None
    encoder_layers: int
    decoder_layers: int
    d_model: int
    max_tokens: int
    precision: str
    tokens_per_s: float
    flops_per_target_token: float
    matmul_peak_gflops: float
    mfu: float
    source: str

    def label(self) -> str:
        if " ~ " in self.source:
            return f"d={self.d_model} between measured widths: MFU {self.mfu:.1%}"
        return (
            f"{self.encoder_layers}L-{self.decoder_layers}L d={self.d_model} {self.max_tokens:,} tok "
            f"{self.precision}: MFU {self.mfu:.1%}"
        )


@cache
def load_rates(path: Path = RATES_FILE) -> tuple[Rate, ...]:
    return tuple(Rate(**row) for row in json.loads(path.read_text(encoding="utf-8")))


def flops_per_target_token(
    encoder_layers: int,
    decoder_layers: int,
    d_model: int,
    ffn_dim: int,
    vocab: int,
    length: int = MEAN_TARGET_LENGTH,
) -> float:
    """Training FLOPs per target token (bench/compare.py's formula: 6 x matmul parameters per token
    plus attention scores and context), source and target ``length`` subwords plus </s>."""
    d, f, n = d_model, ffn_dim, length + 1
    per_src = encoder_layers * (4 * d * d + 2 * d * f) + decoder_layers * 2 * d * d
    per_tgt = decoder_layers * (6 * d * d + 2 * d * f) + d * vocab
    attention = 12 * d * (encoder_layers * n * n + decoder_layers * 2 * n * n)
    return 6 * (per_src + per_tgt) + attention / n


def _log_distance(a: float, b: float) -> float:
    return abs(math.log(a / b))


def pick_rate(
    rates: tuple[Rate, ...],
    *,
    memory_gb: float,
    name: str | None,
    d_model: int,
    max_tokens: int,
    precision: str,
) -> Rate | None:
    """The measured row a run is priced with (module doc), None when the card or precision has none."""
    same_card = [r for r in rates if (name in r.card if name else r.memory_gb == memory_gb)]
    precision = MEASURED_AS.get(precision, precision)
    exact = [r for r in same_card if r.precision == precision]
    usable = exact or [r for r in same_card if precision in SIXTEEN_BIT and r.precision in SIXTEEN_BIT]
    if not usable:
        return None

    def nearest_batch(rows: list[Rate]) -> Rate:
        return min(rows, key=lambda r: _log_distance(r.max_tokens, max_tokens))

    below = [r for r in usable if r.d_model <= d_model]
    above = [r for r in usable if r.d_model >= d_model]
    lo = nearest_batch([r for r in below if r.d_model == max(x.d_model for x in below)]) if below else None
    hi = nearest_batch([r for r in above if r.d_model == min(x.d_model for x in above)]) if above else None
    if lo is None or hi is None or lo.d_model == hi.d_model:  # a measured width, or outside them all
        return lo or hi  # type: ignore[return-value]
    # between two measured widths: the MFU interpolated on log(d_model)
    t = math.log(d_model / lo.d_model) / math.log(hi.d_model / lo.d_model)
    return Rate(
        card=lo.card,
        memory_gb=lo.memory_gb,
        encoder_layers=lo.encoder_layers,
        decoder_layers=lo.decoder_layers,
        d_model=d_model,
        max_tokens=lo.max_tokens,
        precision=lo.precision,
        tokens_per_s=float("nan"),
        flops_per_target_token=float("nan"),
        matmul_peak_gflops=lo.matmul_peak_gflops,
        mfu=lo.mfu + t * (hi.mfu - lo.mfu),
        source=f"{lo.source} ~ {hi.source}",
    )


def gpu_hours(tokens: float, flops_per_token: float, rate: Rate) -> float:
    per_gpu_tokens_per_s = rate.mfu * rate.matmul_peak_gflops * 1e9 / flops_per_token
    return tokens / per_gpu_tokens_per_s / 3600


def binarized_target_tokens(bin_dir: Path, tgt: str) -> int | None:
    """The training split's target tokens as binarize recorded them (None before binarize has run)."""
    meta = bin_dir / "meta.json"
    if not meta.is_file():
        return None
    split = json.loads(meta.read_text(encoding="utf-8")).get("splits", {}).get("train", {})
    tokens = split.get(f"{tgt}_tokens")
    return int(tokens) if tokens is not None else None


def epoch_target_tokens(
    dataset: dict[str, Any], bt: dict[str, Any] | None, binarized: int | None
) -> float | None:
    """Target tokens of one epoch: the binarized count, else the dataset's estimate (and a BT mix's)."""
    if binarized is not None:
        return float(binarized)
    real = dataset.get("train_target_tokens")
    if real is None:
        return None
    if bt is None:
        return float(real)
    mono = dataset.get("mono")
    lines = mono.get("max_lines") if isinstance(mono, dict) else None
    if lines is None:
        return None
    return float(real) * bt.get("upsample_real", 1) + lines * MEAN_TARGET_LENGTH
