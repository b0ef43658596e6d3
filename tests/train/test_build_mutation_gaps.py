"""Mutation gaps of build (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: the settings written out by hand, fairseq's scale window
2^14 / (GPUs x update_freq) worked out, torch's own dtypes."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from pipeline_lib.cpu.onednn import onednn_available, uses_onednn
from pipeline_lib.errors import CheckpointError, ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train import build as build_module
from pipeline_lib.train.build import (
    build_fp16_master,
    build_optimizer,
    build_scaler,
    build_schedule,
    build_train_model,
    check_cpu_workers,
    keep_layernorm_fp32,
    select_device,
)
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.optimizers import DeepnmtRAdam, FairseqAdam, TransformerClinicRAdam

BASE = dict(data="d", source_lang="en", target_lang="fr", save_dir="s", max_update=100)
MODEL = dict(
    src_vocab_size=20, tgt_vocab_size=20, encoder_layers=1, decoder_layers=1, d_model=16, ffn_dim=32, heads=2
)


def train_config(**kw) -> TrainConfig:
    return TrainConfig(**{**BASE, **kw})


@pytest.mark.parametrize(
    "name, cls", [("adam", FairseqAdam), ("radam", TransformerClinicRAdam), ("radam_deepnmt", DeepnmtRAdam)]
)
def test_the_optimizer_takes_every_setting_and_starts_at_the_warmup_rate(name: str, cls: type) -> None:
    cfg = train_config(
        optimizer=name, adam_betas=(0.8, 0.95), adam_eps=1e-6, weight_decay=0.01, warmup_init_lr=3e-7
    )
    param = nn.Parameter(torch.zeros(3))
    optimizer = build_optimizer(cfg, [param])
    assert type(optimizer) is cls
    [group] = optimizer.param_groups
    assert group["params"] == [param]
    assert (group["lr"], tuple(group["betas"]), group["eps"], group["weight_decay"]) == (
        3e-7,
        (0.8, 0.95),
        1e-6,
        0.01,
    )


def test_the_schedule_takes_the_peak_warmup_and_budget() -> None:
    cfg = train_config(lr=1e-3, warmup_updates=10, warmup_init_lr=1e-7, lr_scheduler="linear", max_update=110)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.5)
    schedule = build_schedule(cfg, optimizer)
    # linear warm-up from 1e-7 to 1e-3 over 10 updates, then linear decay to 0 at update 110
    assert schedule.lr_at(0) == pytest.approx(1e-7)
    assert schedule.lr_at(5) == pytest.approx(1e-7 + 5 * (1e-3 - 1e-7) / 10)
    assert schedule.lr_at(60) == pytest.approx(1e-3 * 0.5)
    assert schedule.lr_at(110) == 0.0
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-7)


@pytest.mark.parametrize(
    "amp, enabled", [("fp16", True), ("bf16", False), ("none", False), ("fairseq_fp16", False)]
)
def test_only_amp_fp16_scales_the_loss_with_torchs_scaler(amp: str, enabled: bool) -> None:
    cfg = train_config(
        amp=amp, device="cuda" if "fp16" in amp else "cpu"
    )  # the config allows fp16 on CUDA only
    assert build_scaler(cfg, torch.device("cpu")).is_enabled() is enabled


def test_fairseq_fp16_masters_take_fairseqs_scaler_settings() -> None:
    assert build_fp16_master(train_config(amp="fp16", device="cuda"), nn.Linear(2, 2), 1) is None
    cfg = train_config(
        amp="fairseq_fp16", device="cuda", update_freq=4, fp16_init_scale=64.0, fp16_scale_tolerance=0.25,
        threshold_loss_scale=0.5, min_loss_scale=1e-3,
    )  # fmt: skip
    master = build_fp16_master(cfg, nn.Linear(2, 2), world_size=2)
    scaler = master.scaler
    assert scaler.scale_window == 2**14 / 2 / 4 == 2048  # fairseq's default window
    assert (scaler.loss_scale, scaler.tolerance, scaler.threshold) == (64.0, 0.25, 0.5)
    assert master.min_loss_scale == 1e-3
    given = build_fp16_master(
        train_config(amp="fairseq_fp16", device="cuda", fp16_scale_window=100), nn.Linear(2, 2), 8
    )
    assert given.scaler.scale_window == 100


def test_a_cpu_run_stays_on_the_cpu_and_cuda_without_a_gpu_is_an_error() -> None:
    env = DistributedEnv(
        rank=0, world_size=1, local_rank=0, master_addr="", master_port=29500, backend="gloo"
    )
    assert select_device(train_config(device="cpu"), env) == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(CheckpointError, match="--device cuda was given but torch sees no CUDA device"):
            select_device(train_config(device="cuda"), env)


def test_cpu_workers_refuse_ranks_and_attention_dropout_only_above_one() -> None:
    model = ModelConfig(**MODEL, attention_dropout=0.1)
    check_cpu_workers(train_config(cpu_workers=1), model, distributed=True)  # one worker: fine
    with pytest.raises(ConfigError, match="does not combine with torchrun/srun"):
        check_cpu_workers(train_config(cpu_workers=2), ModelConfig(**MODEL), distributed=True)
    with pytest.raises(ConfigError, match="--attention-dropout 0"):
        check_cpu_workers(train_config(cpu_workers=2), model, distributed=False)
    check_cpu_workers(
        train_config(cpu_workers=2), ModelConfig(**MODEL, attention_dropout=0.0), distributed=False
    )


def test_layer_norm_returns_fp32_under_cpu_bf16_autocast() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    x = torch.randn(2, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(x).dtype == torch.bfloat16  # CPU autocast's own behaviour
    keep_layernorm_fp32(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(x).dtype == torch.float32


@pytest.mark.parametrize("amp, hooked", [("bf16", True), ("none", False)])
def test_the_train_model_is_seeded_and_hooked_only_under_autocast(amp: str, hooked: bool) -> None:
    cfg = train_config(seed=7, amp=amp, checkpoint_activations=True)
    model = build_train_model(cfg, ModelConfig(**MODEL), torch.device("cpu"), None, chunked_loss=False)
    assert model.encoder.checkpoint_layers and model.decoder.checkpoint_layers
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    assert norms and all(bool(m._forward_pre_hooks) == hooked for m in norms)
    again = build_train_model(cfg, ModelConfig(**MODEL), torch.device("cpu"), None, chunked_loss=False)
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True)
    )
    other = build_train_model(
        train_config(seed=8, amp=amp), ModelConfig(**MODEL), torch.device("cpu"), None, False
    )
    assert not torch.equal(model.encoder.embed.table.weight, other.encoder.embed.table.weight)


def test_compile_wraps_every_layer_and_says_so(caplog) -> None:
    cfg = train_config(compile=True)
    with caplog.at_level(logging.INFO, logger="pipeline_lib.train.build"):
        model = build_train_model(cfg, ModelConfig(**MODEL), torch.device("cpu"), None, chunked_loss=False)
    layers = [*model.encoder.layers, *model.decoder.layers]
    assert all(layer._compiled_call_impl is not None for layer in layers)  # nn.Module.compile's wrapper
    assert [r.getMessage() for r in caplog.records] == ["torch.compile (default): 2 layers"]


def test_compile_hands_the_configured_mode_to_the_layers(monkeypatch) -> None:
    # a recorder for compile_layers: the mode reaches it by name (a compiled layer does not show it)
    calls = []
    monkeypatch.setattr(build_module, "compile_layers", lambda model, **kwargs: calls.append(kwargs) or 0)
    build_train_model(train_config(compile=True), ModelConfig(**MODEL), torch.device("cpu"), None, False)
    assert calls == [{"mode": "default"}]


@pytest.mark.parametrize("max_tokens", [1024, 4096])
def test_auto_picks_onednn_only_for_big_models_and_batches_on_avx512(max_tokens: int, caplog) -> None:
    """d >= 256 and >= 2,048 tokens per micro-batch on an AVX-512 CPU with oneDNN's linear op
    (bench/HISTORY.md); mkl otherwise."""
    big = {**MODEL, "d_model": 256, "ffn_dim": 256, "heads": 4}
    cfg = train_config(cpu_gemm="auto", max_tokens=max_tokens)
    with caplog.at_level(logging.INFO, logger="pipeline_lib.train.build"):
        model = build_train_model(cfg, ModelConfig(**big), torch.device("cpu"), None, chunked_loss=True)
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    expected = "onednn" if avx512 and max_tokens >= 2048 and onednn_available() else "mkl"
    assert [r.getMessage() for r in caplog.records] == [f"fp32 CPU matmuls: {expected}"]
    assert uses_onednn(model.encoder.layers[0].ffn.fc1) == (expected == "onednn")
