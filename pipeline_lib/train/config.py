"""The validated training configuration (everything except the model architecture).

Field names are the CLI flags with dashes turned into underscores, so an error naming
``train.warmup_updates`` points at ``--warmup-updates``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from pipeline_lib.errors import ConfigError
from pipeline_lib.model.linear import CPU_GEMMS

OPTIMIZERS = ("radam", "adam")
AMP_MODES = ("none", "bf16", "fp16")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    data: str
    source_lang: str
    target_lang: str
    save_dir: str
    train_subset: str = "train"
    valid_subset: str = "valid"
    optimizer: str = "radam"
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    lr: float = 7e-4
    warmup_updates: int = 4000
    warmup_init_lr: float = 1e-7
    clip_norm: float = 0.0  # 0 = no clipping (the papers' setting)
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    max_tokens: int = 4096
    max_sentences: int | None = None
    update_freq: int = 1
    max_epoch: int = 0  # 0 = no limit
    max_update: int = 0  # 0 = no limit
    seed: int = 1
    save_interval_updates: int = 0  # 0 = only at epoch ends
    keep_interval_updates: int = 0  # >0: also keep checkpoint_{epoch}_{update}.pt files, this many
    keep_last_epochs: int = -1  # -1 = keep every checkpoint{epoch}.pt
    log_interval: int = 100
    amp: str = "none"
    device: str = "cpu"
    divergence_window: int = 1000
    # nll bits/token; None = log2(vocab) (worse than a uniform guess); "unigram" = the entropy of a
    # unigram model of the training targets (the run has not learned to use any context)
    divergence_threshold: float | str | None = None
    admin_profile: str | None = None
    admin_closed_form: bool = False
    num_threads: int = 0  # 0 = torch's default
    # CPU: run this many of an update's micro-batches at once, one thread each (pipeline_lib.cpu.threads)
    cpu_workers: int = 1
    # fp32 CPU training: the linear layers' matmul library (pipeline_lib/model/linear.py)
    cpu_gemm: str = "auto"  # auto | mkl | onednn
    progress: str = "auto"  # auto | tqdm | none

    def __post_init__(self) -> None:
        self._choice("optimizer", OPTIMIZERS)
        self._choice("amp", AMP_MODES)
        self._choice("device", DEVICES)
        self._choice("progress", ("auto", "tqdm", "none"))
        self._choice("cpu_gemm", CPU_GEMMS)
        if self.cpu_gemm == "onednn" and (self.device != "cpu" or self.amp != "none"):
            raise ConfigError(
                "train.cpu_gemm=onednn (--cpu-gemm onednn) is for fp32 training: --device cpu --amp none"
            )
        for name in ("source_lang", "target_lang", "data", "save_dir", "train_subset", "valid_subset"):
            if not getattr(self, name):
                raise ConfigError(f"train.{name} (--{name.replace('_', '-')}) must not be empty")
        if len(self.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in self.adam_betas):
            raise ConfigError(
                f"train.adam_betas (--adam-betas) must be two numbers in [0, 1), got {self.adam_betas}"
            )
        self._positive_float("adam_eps", "lr")
        self._non_negative_float("warmup_init_lr", "clip_norm", "weight_decay")
        if self.warmup_init_lr > self.lr:
            raise ConfigError(f"train.warmup_init_lr={self.warmup_init_lr} exceeds train.lr={self.lr}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(
                f"train.label_smoothing (--label-smoothing) must be in [0, 1), got {self.label_smoothing}"
            )
        self._positive_int("max_tokens", "update_freq", "log_interval", "divergence_window", "cpu_workers")
        if self.cpu_workers > 1 and self.device != "cpu":
            raise ConfigError("train.cpu_workers (--cpu-workers) > 1 is for --device cpu")
        self._non_negative_int("warmup_updates", "max_epoch", "max_update", "save_interval_updates")
        self._non_negative_int("keep_interval_updates", "num_threads", "seed")
        if self.max_sentences is not None:
            self._positive_int("max_sentences")
        if self.keep_last_epochs < -1:
            raise ConfigError(
                f"train.keep_last_epochs (--keep-last-epochs) must be >= -1, got {self.keep_last_epochs}"
            )
        if self.max_epoch == 0 and self.max_update == 0:
            raise ConfigError(
                "set --max-epoch or --max-update (train.max_epoch / train.max_update): both are 0"
            )
        threshold = self.divergence_threshold
        if isinstance(threshold, str):
            if threshold != "unigram":
                raise ConfigError(
                    f"train.divergence_threshold (--divergence-threshold) must be a number or 'unigram', "
                    f"got {threshold!r}"
                )
        elif threshold is not None and not (math.isfinite(threshold) and threshold > 0):
            raise ConfigError("train.divergence_threshold (--divergence-threshold) must be finite and > 0")
        if self.amp == "fp16" and self.device == "cpu":
            # torch supports it, but it is slow and pointless; bf16 is the CPU choice.
            raise ConfigError("train.amp=fp16 (--amp fp16) needs --device cuda; use --amp bf16 on CPU")

    def _flag(self, name: str) -> str:
        return f"train.{name} (--{name.replace('_', '-')})"

    def _choice(self, name: str, choices: tuple[str, ...]) -> None:
        if getattr(self, name) not in choices:
            raise ConfigError(
                f"{self._flag(name)}={getattr(self, name)!r} is not one of {', '.join(choices)}"
            )

    def _positive_int(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{self._flag(name)} must be a positive integer, got {value!r}")

    def _non_negative_int(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{self._flag(name)} must be a non-negative integer, got {value!r}")

    def _positive_float(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{self._flag(name)} must be a positive number, got {value!r}")

    def _non_negative_float(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{self._flag(name)} must be a non-negative number, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["adam_betas"] = list(self.adam_betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "train") -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
        data = dict(data)
        if "adam_betas" in data:
            data["adam_betas"] = tuple(float(b) for b in data["adam_betas"])
        return cls(**data)


# Keys whose change makes a resumed run differ from an uninterrupted one (warned about on resume).
TRAJECTORY_KEYS = (
    "optimizer", "adam_betas", "adam_eps", "lr", "warmup_updates", "warmup_init_lr", "clip_norm",
    "weight_decay", "label_smoothing", "max_tokens", "max_sentences", "update_freq", "seed", "amp",
)  # fmt: skip


def parse_betas(text: str) -> tuple[float, float]:
    """fairseq's ``--adam-betas '(0.9, 0.98)'`` (also accepts ``0.9,0.98``)."""
    cleaned = text.strip().strip("()[]")
    try:
        values = tuple(float(part) for part in cleaned.split(",") if part.strip())
    except ValueError as exc:
        raise ConfigError(f"--adam-betas {text!r}: expected two numbers such as '(0.9, 0.98)'") from exc
    if len(values) != 2:
        raise ConfigError(f"--adam-betas {text!r}: expected two numbers such as '(0.9, 0.98)'")
    return values  # type: ignore[return-value]
