"""The validated training configuration (everything except the model architecture).

Field names are the CLI flags with dashes turned into underscores, so an error naming
``train.warmup_updates`` points at ``--warmup-updates``.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any

from pipeline_lib.cpu.gemm_names import CPU_GEMMS
from pipeline_lib.divergence.rule import UNIGRAM
from pipeline_lib.errors import ConfigError
from pipeline_lib.field_spec import check_fields
from pipeline_lib.lang_code import is_lang_code
from pipeline_lib.model.config import COMPILE_MODES

OPTIMIZERS = ("radam", "adam", "radam_deepnmt")
LR_SCHEDULERS = ("inverse_sqrt", "fixed", "linear")
AMP_MODES = ("none", "bf16", "fp16", "fairseq_fp16")
DEVICES = ("cpu", "cuda")
PROGRESS_MODES = ("auto", "lines", "tqdm", "none")


def _betas_arg(text: str) -> tuple[float, float]:
    try:
        return parse_betas(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _threshold_arg(text: str) -> float | str:
    if text == UNIGRAM:
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'unigram', got {text!r}") from None


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def setting(
    default: Any = dataclasses.MISSING, help: str | None = None, *, recipe: bool = False, **meta: Any
) -> Any:
    """A TrainConfig field: its flag's help and group, whether a workflow recipe may set it, and in
    ``meta`` its choices and bounds (pipeline_lib/field_spec.py: checked here, and the workflow schema's
    recipe keys are generated from them) and ``trajectory`` (changing it on resume changes the run)."""
    return dataclasses.field(default=default, metadata={"help": help, "recipe": recipe, **meta})


DATA, OPTIM, ADMIN, RUNTIME = "data", "optimization", "admin", "runtime"


@dataclass(frozen=True)
class TrainConfig:
    """Every training setting; ``python -m pipeline_lib train`` derives its flags from these fields
    (pipeline_lib/dataclass_cli.py) and the workflow passes the ones marked ``recipe`` from a recipe."""

    data: str = setting(help="binarized directory (python -m pipeline_lib binarize)", group=DATA)
    source_lang: str = setting(group=DATA)
    target_lang: str = setting(group=DATA)
    save_dir: str = setting(group=DATA)
    train_subset: str = setting("train", group=DATA)
    valid_subset: str = setting("valid", group=DATA)
    max_tokens: int = setting(
        4096, "padded tokens per batch per process", recipe=True, group=DATA, ge=1, trajectory=True
    )
    max_sentences: int | None = setting(
        None, "sentences per batch (default: no limit)", recipe=True, group=DATA, ge=1, trajectory=True
    )
    optimizer: str = setting(
        "radam",
        "adam: fairseq's (decoupled weight decay); radam: Transformer-Clinic's (no step while the "
        "rectification term is below 5); radam_deepnmt: deepnmt's, the Very Deep paper's script (a "
        "momentum step there)",
        recipe=True,
        group=OPTIM,
        choices=OPTIMIZERS,
        trajectory=True,
    )
    adam_betas: tuple[float, float] = setting(
        (0.9, 0.98),
        "fairseq's '(0.9, 0.98)'",
        recipe=True,
        group=OPTIM,
        type=_betas_arg,
        ge=0.0,
        lt=1.0,
        trajectory=True,
    )
    adam_eps: float = setting(1e-8, recipe=True, group=OPTIM, gt=0, trajectory=True)
    lr: float = setting(7e-4, "peak learning rate", recipe=True, group=OPTIM, gt=0, trajectory=True)
    lr_scheduler: str = setting(
        "inverse_sqrt",
        "after the linear warm-up: inverse_sqrt decays as 1/sqrt(update) (from update 1 with no warm-up); "
        "fixed keeps the peak rate (fairseq's schedulers of these names); linear decays to 0 at "
        "--max-update (Transformer-Clinic's, Admin Figure 10)",
        recipe=True,
        group=OPTIM,
        choices=LR_SCHEDULERS,
        trajectory=True,
    )
    warmup_updates: int = setting(4000, recipe=True, group=OPTIM, ge=0, trajectory=True)
    warmup_init_lr: float = setting(1e-7, recipe=True, group=OPTIM, ge=0, trajectory=True)
    clip_norm: float = setting(
        0.0, "0 = no clipping (the papers' setting)", recipe=True, group=OPTIM, ge=0, trajectory=True
    )
    weight_decay: float = setting(0.0, recipe=True, group=OPTIM, ge=0, trajectory=True)
    label_smoothing: float = setting(0.1, recipe=True, group=OPTIM, ge=0, lt=1, trajectory=True)
    update_freq: int = setting(
        1, "accumulate gradients over N batches", recipe=True, group=OPTIM, ge=1, trajectory=True
    )
    max_epoch: int = setting(0, "0 = no limit", recipe=True, group=OPTIM, ge=0)
    max_update: int = setting(0, "0 = no limit", recipe=True, group=OPTIM, ge=0)
    seed: int = setting(1, group=OPTIM, ge=0, trajectory=True)
    divergence_window: int = setting(
        1000,
        "updates in the mean training nll that the divergence rule judges",
        recipe=True,
        group=OPTIM,
        ge=1,
    )
    divergence_after: int | None = setting(
        None,
        "update from which a run whose window mean is still at or above the threshold is 'stuck' "
        "(default: warm-up + window)",
        recipe=True,
        group=OPTIM,
        ge=0,
    )
    divergence_threshold: float | str | None = setting(
        None,
        "training nll (bits/token) that a run must get below: at or above it after --divergence-after "
        "updates, or back at it after having gone below, the run counts as diverged. Default "
        "log2(vocab): a uniform guess; 'unigram': a unigram model of the training targets",
        recipe=True,
        group=OPTIM,
        type=_threshold_arg,
        gt=0,
        keywords=(UNIGRAM,),
    )
    admin_profile: str | None = setting(None, "ω profile JSON (required with --residual admin)", group=ADMIN)
    admin_closed_form: bool = setting(False, "Admin ω from the closed form, no profile", group=ADMIN)
    device: str = setting("cpu", group=RUNTIME, choices=DEVICES, cli_default=_default_device)
    amp: str = setting(
        "none",
        "bf16 / fp16: autocast over fp32 weights (fp16 with torch's GradScaler); fairseq_fp16: fairseq's "
        "--fp16, fp16 weights and activations with fp32 master weights and fairseq's dynamic loss scaler "
        "(the --fp16-* flags below), as the papers' authors trained",
        recipe=True,
        group=RUNTIME,
        choices=AMP_MODES,
        trajectory=True,
    )
    fp16_init_scale: float = setting(
        128.0, "fairseq_fp16: the initial loss scale (fairseq's --fp16-init-scale)", recipe=True,
        group=RUNTIME, gt=0, trajectory=True,
    )  # fmt: skip
    fp16_scale_window: int | None = setting(
        None,
        "fairseq_fp16: updates without overflow before the loss scale doubles (fairseq's "
        "--fp16-scale-window; default 2^14 / (GPUs x --update-freq), as fairseq)",
        recipe=True,
        group=RUNTIME,
        ge=1,
        trajectory=True,
    )
    fp16_scale_tolerance: float = setting(
        0.0,
        "fairseq_fp16: the fraction of updates since the last rescale that may overflow before the scale "
        "is lowered (fairseq's --fp16-scale-tolerance)",
        recipe=True,
        group=RUNTIME,
        ge=0,
        le=1,
        trajectory=True,
    )
    threshold_loss_scale: float | None = setting(
        None,
        "fairseq_fp16: the loss scale never falls below this (fairseq's --threshold-loss-scale; "
        "Transformer-Clinic's scripts pass 0.03125)",
        recipe=True,
        group=RUNTIME,
        gt=0,
        trajectory=True,
    )
    min_loss_scale: float = setting(
        1e-4,
        "fairseq_fp16: an overflow that leaves the scale at or below this ends the run as diverged "
        "(fairseq's --min-loss-scale: 'Minimum loss scale reached')",
        recipe=True,
        group=RUNTIME,
        gt=0,
    )
    checkpoint_activations: bool = setting(
        False,
        "recompute each layer's activations in backward instead of keeping them (less memory for "
        "deep models, one more forward pass of compute; same gradients)",
        recipe=True,
        group=RUNTIME,
    )
    pad_to_multiple: int = setting(
        1,
        "pad each batch's source and target length up to a multiple of this (8 on a GPU: a bounded set of "
        "shapes for the kernels and their caches, tensor-core-aligned; the loss is unchanged)",
        recipe=True,
        group=RUNTIME,
        ge=1,
    )
    deferred_stats: bool = setting(
        False,
        "read each update's loss and gradient norm after queuing the next update's forward and backward, "
        "so the host does not wait for the GPU within a step (same updates and checkpoints; a diverged "
        "update is still caught before anything is saved). With fp16 the next update is queued as if this "
        "one did not overflow; an overflow is taken back and the next forward and backward rerun",
        recipe=True,
        group=RUNTIME,
    )
    compile: bool = setting(
        False,
        "torch.compile each encoder and decoder layer (one graph per layer kind, reused down the stack; "
        "for GPUs, with --pad-to-multiple 8). Dropout masks then come from the compiled graph's RNG",
        recipe=True,
        group=RUNTIME,
        trajectory=True,  # dropout masks come from the compiled graph's RNG
    )
    compile_mode: str = setting(
        "default",
        "with --compile: reduce-overhead replays each layer's forward and backward as CUDA graphs, one "
        "per padded batch shape (needs --device cuda and --pad-to-multiple > 1 to bound the shapes): "
        "for small per-GPU batches, where the step waits on kernel launches",
        recipe=True,
        group=RUNTIME,
        choices=COMPILE_MODES,
        trajectory=True,
    )
    num_threads: int = setting(0, "torch CPU threads (0: torch's default)", group=RUNTIME, ge=0)
    cpu_workers: int = setting(
        1,
        "CPU: run this many of an update's --update-freq micro-batches at once, one thread each "
        "(same update, same result up to float rounding; e.g. --max-tokens 2048 --update-freq 2 "
        "--cpu-workers 2 on 2 cores)",
        group=RUNTIME,
        ge=1,
    )
    cpu_gemm: str = setting(
        "auto",
        "fp32 CPU training: the linear layers' matmul library (auto: oneDNN on AVX-512 CPUs for "
        "d >= 256 and --max-tokens >= 2048, where it measured faster than MKL; pipeline_lib/cpu/onednn.py)",
        group=RUNTIME,
        choices=CPU_GEMMS,
    )
    save_interval_updates: int = setting(
        0, "also save every N updates (0: off)", recipe=True, group=RUNTIME, ge=0
    )
    keep_interval_updates: int = setting(
        0, "keep N checkpoint_{epoch}_{update}.pt", recipe=True, group=RUNTIME, ge=0
    )
    keep_last_epochs: int = setting(
        -1, "keep N checkpoint{epoch}.pt (-1: all)", recipe=True, group=RUNTIME, ge=-1
    )
    log_interval: int = setting(
        100, "JSONL and TensorBoard train record every N updates", recipe=True, group=RUNTIME, ge=1
    )
    validate_interval_updates: int = setting(
        -1,
        "also validate every N updates, besides each epoch end (fairseq's --validate-interval-updates; "
        "0: only at epoch ends; -1: about 10 dev points over the planned updates): a dev curve in "
        "train_log.jsonl and TensorBoard, checkpoint_best.pt and --patience count these",
        recipe=True,
        group=RUNTIME,
        ge=-1,
    )
    patience: int = setting(
        0,
        "early stopping (fairseq's --patience): end the run, completed, after N validations in a row "
        "without a lower dev loss than checkpoint_best.pt's (0: off)",
        recipe=True,
        group=RUNTIME,
        ge=0,
    )
    progress: str = setting(
        "auto",
        "lines: a plain progress line at the first update and then at most every --progress-interval "
        "seconds (for log files: SLURM, Snakemake); tqdm: a bar; auto: tqdm on a TTY, lines otherwise",
        group=RUNTIME,
        choices=PROGRESS_MODES,
    )
    progress_interval: float = setting(
        30.0, "--progress lines: seconds between lines (at most one per update)", group=RUNTIME, ge=0
    )
    progress_fd: int = setting(
        0,
        "--progress lines: also write each line to this open file descriptor (the workflow passes the "
        "job's console, whose stderr goes to the log file; 0: none)",
        group=RUNTIME,
    )

    def __post_init__(self) -> None:
        # Choices and bounds come from the fields' metadata (the workflow schema is generated from it).
        check_fields(self, self._flag)
        if self.cpu_gemm == "onednn" and (self.device != "cpu" or self.amp != "none"):
            raise ConfigError(
                "train.cpu_gemm=onednn (--cpu-gemm onednn) is for fp32 training: --device cpu --amp none"
            )
        for name in ("source_lang", "target_lang", "data", "save_dir", "train_subset", "valid_subset"):
            if not getattr(self, name):
                raise ConfigError(f"train.{name} (--{name.replace('_', '-')}) must not be empty")
        for name in ("source_lang", "target_lang"):
            if not is_lang_code(getattr(self, name)):
                raise ConfigError(
                    f"train.{name} (--{name.replace('_', '-')}): {getattr(self, name)!r} is not a "
                    "language code (two or three lower-case letters with optional -subtags: en, pt-br)"
                )
        if self.warmup_init_lr > self.lr:
            raise ConfigError(f"train.warmup_init_lr={self.warmup_init_lr} exceeds train.lr={self.lr}")
        if self.cpu_workers > 1 and self.device != "cpu":
            raise ConfigError("train.cpu_workers (--cpu-workers) > 1 is for --device cpu")
        if self.cpu_workers > 1 and self.compile:
            raise ConfigError(
                "train.compile (--compile) runs micro-batches one at a time: drop --cpu-workers"
            )
        if self.compile_mode != "default" and not self.compile:
            raise ConfigError(f"train.compile_mode={self.compile_mode} (--compile-mode) needs --compile")
        if self.compile_mode == "reduce-overhead" and (self.device != "cuda" or self.pad_to_multiple < 2):
            raise ConfigError(
                "train.compile_mode=reduce-overhead (--compile-mode) captures CUDA graphs: it needs "
                "--device cuda and --pad-to-multiple 8 (one graph per padded batch shape)"
            )
        if self.compile and self.cpu_gemm == "onednn":
            raise ConfigError(
                "train.compile (--compile) leaves the products to the compiler: drop --cpu-gemm onednn"
            )
        if self.lr_scheduler == "linear" and self.max_update <= self.warmup_updates:
            raise ConfigError(
                "train.lr_scheduler=linear decays to 0 at --max-update: set it above --warmup-updates"
            )
        if self.max_epoch == 0 and self.max_update == 0:
            raise ConfigError(
                "set --max-epoch or --max-update (train.max_epoch / train.max_update): both are 0"
            )
        if self.amp == "fairseq_fp16" and self.cpu_workers > 1:
            raise ConfigError("train.amp=fairseq_fp16 runs micro-batches one at a time: drop --cpu-workers")
        if self.amp == "fp16" and self.device == "cpu":
            # torch supports it, but it is slow and pointless; bf16 is the CPU choice. (fairseq_fp16 runs on
            # a CPU, slowly, for the checks against fairseq and the tests.)
            raise ConfigError("train.amp=fp16 (--amp fp16) needs --device cuda; use --amp bf16 on CPU")

    @staticmethod
    def _flag(name: str) -> str:
        return f"train.{name} (--{name.replace('_', '-')})"

    @property
    def stuck_after(self) -> int:
        """The update from which the divergence rule's ``stuck`` clause applies."""
        return stuck_after(self.divergence_after, self.warmup_updates, self.divergence_window)

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


def stuck_after(divergence_after: int | None, warmup_updates: int, divergence_window: int) -> int:
    """``divergence_after`` if set, else warm-up + window (the first full window after warm-up)."""
    return divergence_after if divergence_after is not None else warmup_updates + divergence_window


# Keys whose change makes a resumed run differ from an uninterrupted one (warned about on resume):
# the fields whose metadata says ``trajectory``.
TRAJECTORY_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.metadata.get("trajectory"))


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


def recipe_defaults() -> dict[str, Any]:
    """The settings a workflow recipe may give (the rest come from the experiment or the rule), with
    the value each takes when a recipe leaves it out."""
    return {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.metadata.get("recipe")}


def recipe_fields() -> tuple[str, ...]:
    return tuple(recipe_defaults())
