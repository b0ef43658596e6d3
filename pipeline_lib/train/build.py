"""What a run trains with: the device, the model (seeded, Admin-initialised, compiled, on its CPU GEMM
library), the optimizer, the learning-rate schedule and the loss scaler of its precision mode.

The order of the calls in :class:`~pipeline_lib.train.trainer.Trainer` is part of reproducibility:
the model is built right after ``torch.manual_seed(seed)``, so nothing may draw from the global RNG
between the two.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from pipeline_lib.cpu.onednn import resolve_cpu_gemm, set_cpu_gemm
from pipeline_lib.errors import CheckpointError, ConfigError
from pipeline_lib.model.admin import AdminProfile, apply_profile
from pipeline_lib.model.attention import avoid_cudnn_attention
from pipeline_lib.model.compile import compile_layers
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel, build_model
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.fp16_master import FP16MasterWeights
from pipeline_lib.train.loss_scaler import DynamicLossScaler, default_scale_window
from pipeline_lib.train.optimizers import OPTIMIZER_CLASSES
from pipeline_lib.train.schedule import LrSchedule

log = logging.getLogger(__name__)

# The autocast dtype of each --amp mode; fairseq_fp16 casts the model itself (train/fp16_master.py).
AMP_DTYPES: dict[str, torch.dtype | None] = {
    "none": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fairseq_fp16": None,
}


@dataclass
class Context:
    """What the trainer needs to know about its data besides the config."""

    vocab_size: int
    vocab_sha256: str | None
    pad: int = 0
    bos: int = 1
    eos: int = 2


def select_device(cfg: TrainConfig, env: DistributedEnv) -> torch.device:
    if cfg.device != "cuda":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise CheckpointError("--device cuda was given but torch sees no CUDA device")
    device = torch.device("cuda", env.local_rank)
    torch.cuda.set_device(device)
    avoid_cudnn_attention()
    return device


def check_cpu_workers(cfg: TrainConfig, model_cfg: ModelConfig, distributed: bool) -> None:
    if cfg.cpu_workers > 1 and distributed:
        raise ConfigError("--cpu-workers > 1 runs one process; it does not combine with torchrun/srun ranks")
    if cfg.cpu_workers > 1 and model_cfg.attention_dropout > 0:
        # attention dropout happens inside scaled_dot_product_attention, on the global generator
        raise ConfigError("--cpu-workers > 1 needs --attention-dropout 0 (reproducible masks)")


def keep_layernorm_fp32(model: nn.Module) -> None:
    """Under autocast, feed LayerNorm fp32 input so it computes and returns fp32 (CUDA autocast does this
    already; CPU autocast would return bf16). The residual stream then stays fp32 between sub-layers."""

    def to_fp32(_module: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return (args[0].float(), *args[1:])

    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.register_forward_pre_hook(to_fp32)


def build_train_model(
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    device: torch.device,
    admin_profile: AdminProfile | None,
    chunked_loss: bool,
) -> TransformerModel:
    """The model initialised from ``cfg.seed``, with everything the run's settings add to it."""
    torch.manual_seed(cfg.seed)
    model = build_model(model_cfg)
    model.set_activation_checkpointing(cfg.checkpoint_activations)
    if admin_profile is not None:
        apply_profile(model, admin_profile)
    model.to(device)
    if AMP_DTYPES[cfg.amp] is not None:
        keep_layernorm_fp32(model)
    if cfg.compile:
        log.info(
            "torch.compile (%s): %d layers", cfg.compile_mode, compile_layers(model, mode=cfg.compile_mode)
        )
    if chunked_loss:  # fp32 on a CPU
        gemm = resolve_cpu_gemm(cfg.cpu_gemm, model_cfg.d_model, cfg.max_tokens)
        set_cpu_gemm(model, gemm)
        log.info("fp32 CPU matmuls: %s", gemm)
    # Master weights stay fp32 whatever the AMP mode: autocast only casts activations.
    assert all(p.dtype == torch.float32 for p in model.parameters())
    return model


def build_optimizer(cfg: TrainConfig, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """fairseq's Adam or Transformer-Clinic's RAdam (train/optimizers.py), over ``params``: the model's,
    or with fairseq_fp16 their fp32 masters."""
    return OPTIMIZER_CLASSES[cfg.optimizer](
        params, lr=cfg.warmup_init_lr, betas=cfg.adam_betas, eps=cfg.adam_eps, weight_decay=cfg.weight_decay
    )


def build_fp16_master(cfg: TrainConfig, model: nn.Module, world_size: int) -> FP16MasterWeights | None:
    """fairseq_fp16: the model cast to fp16 behind fp32 masters and fairseq's scaler; else None."""
    if cfg.amp != "fairseq_fp16":
        return None
    window = cfg.fp16_scale_window or default_scale_window(world_size, cfg.update_freq)
    scaler = DynamicLossScaler(
        init_scale=cfg.fp16_init_scale,
        scale_window=window,
        tolerance=cfg.fp16_scale_tolerance,
        threshold=cfg.threshold_loss_scale,
    )
    return FP16MasterWeights(model, scaler, cfg.min_loss_scale)


def build_schedule(cfg: TrainConfig, optimizer: torch.optim.Optimizer) -> LrSchedule:
    return LrSchedule(
        optimizer,
        cfg.lr,
        cfg.warmup_updates,
        cfg.warmup_init_lr,
        decay=cfg.lr_scheduler,
        max_update=cfg.max_update,
    )


def build_scaler(cfg: TrainConfig, device: torch.device) -> torch.amp.GradScaler:
    """fp16 needs loss scaling; bf16 and fp32 get a disabled scaler, whose calls do nothing."""
    return torch.amp.GradScaler(device.type, enabled=cfg.amp == "fp16")
