"""The memory estimate behind the plan's "memory per GPU" column, checked against what autograd saves
on a CPU and against the peaks an H200 measured."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.dropout import dropout_generator
from pipeline_lib.model.memory_estimate import (
    Recipe,
    Shape,
    estimate_training_memory,
    layer_bytes_per_token,
    parameter_count,
)
from pipeline_lib.train.config import TrainConfig

VOCAB, LENGTH = 200, 32
EVIDENCE = Path(__file__).resolve().parents[2] / "bench/results/gpu-nvidia-h200-evidence.json"


def _model(enc: int, dec: int, shape: Shape, drops: tuple[float, float, float]):
    torch.manual_seed(0)
    cfg = ModelConfig(VOCAB, VOCAB, encoder_layers=enc, decoder_layers=dec, d_model=shape.d_model,
                      ffn_dim=shape.ffn_dim, heads=shape.heads, dropout=drops[0], attention_dropout=drops[1],
                      activation_dropout=drops[2], residual=shape.residual)  # fmt: skip
    return build_model(cfg).train()


def _saved_bytes(model, sentences: int, amp: str) -> int:
    """Bytes of the distinct non-parameter storages autograd saves for one forward pass and loss, with
    the trainer's dropout (a generator per micro-batch: 1-byte masks)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            storages[st.data_ptr()] = st.nbytes()
        return t

    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, VOCAB, (sentences, LENGTH), generator=g)
    prev = torch.randint(4, VOCAB, (sentences, LENGTH), generator=g)
    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        dropout_generator(torch.Generator().manual_seed(1)),
    ):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp != "none"):
            logits = model(src, prev)
        F.cross_entropy(logits.float().flatten(0, 1), prev.flatten())
    return sum(storages.values())


def _per_token(model, amp: str) -> float:
    """Saved bytes per target token: the slope between two batch sizes, which drops what does not grow
    with the batch (autocast's 16-bit weight copies)."""
    return (_saved_bytes(model, 12, amp) - _saved_bytes(model, 4, amp)) / (8 * LENGTH)


@pytest.mark.parametrize("residual", ["post_ln", "pre_ln", "admin"])
@pytest.mark.parametrize("amp", ["none", "bf16"])
@pytest.mark.parametrize(
    "drops", [(0.1, 0.0, 0.0), (0.1, 0.1, 0.1), (0.0, 0.0, 0.0), (0.3, 0.1, 0.0), (0.1, 0.0, 0.2)]
)
def test_per_layer_activations_bound_what_autograd_saves(
    drops: tuple[float, float, float], amp: str, residual: str
) -> None:
    shape = Shape(1, 1, 128, 512, 8, VOCAB, residual=residual)
    # The CPU runs SDPA's fused kernel without attention dropout and the math path with it.
    recipe = Recipe(*drops, amp=amp, fused_attention=drops[1] == 0)
    one = _per_token(_model(1, 1, shape, drops), amp)
    for enc, dec, decoder in ((2, 1, False), (1, 2, True)):
        measured = _per_token(_model(enc, dec, shape, drops), amp) - one
        estimated = layer_bytes_per_token(shape, recipe, LENGTH, decoder=decoder)
        # an upper bound, and a close one
        assert measured <= estimated <= 1.15 * measured, (decoder, measured, estimated)


def _gpu_points() -> list[tuple[str, dict, bool]]:
    steps = json.loads(EVIDENCE.read_text())["steps"]
    names = ["base_bf16", "big_bf16", "60L12L_admin_bf16", "60L12L_admin_bf16_ckpt"]
    return [(n, steps[n]["result"], "--checkpoint-activations" in steps[n]["argv"]) for n in names]


def _flag(argv: list[str], flag: str, default: int) -> int:
    return int(argv[argv.index(flag) + 1]) if flag in argv else default


@pytest.mark.parametrize(("name", "result", "checkpointing"), _gpu_points())
def test_estimate_is_within_15_percent_of_the_h200_peaks(
    name: str, result: dict, checkpointing: bool
) -> None:
    """torch.cuda.max_memory_allocated of bench/train_throughput.py --loop (bf16, fused Adam, SDPA's
    flash / memory-efficient kernels, ModelConfig's dropouts 0.1 / 0 / 0). The estimate bounds a full
    batch of max_tokens; the measured batches held ~94-95% of it (target_tokens_per_update)."""
    argv = json.loads(EVIDENCE.read_text())["steps"][name]["argv"].split()
    shape = Shape(
        _flag(argv, "--encoder-layers", 6), _flag(argv, "--decoder-layers", 6), _flag(argv, "--d-model", 512),
        _flag(argv, "--ffn", 2048), _flag(argv, "--heads", 8), result["vocab"], residual=result["residual"],
    )  # fmt: skip
    model = ModelConfig(VOCAB, VOCAB)
    recipe = Recipe(model.dropout, model.attention_dropout, model.activation_dropout, amp=result["amp"])
    estimate = estimate_training_memory(shape, result["max_tokens"], recipe, checkpointing=checkpointing)
    measured_gb = result["peak_memory_mib"] * 2**20 / 1e9
    assert estimate.total_gb == pytest.approx(measured_gb, rel=0.15), (name, measured_gb, estimate)


def test_recipe_defaults_are_the_trainers() -> None:
    """cli_plan falls back on Recipe's defaults where a recipe is silent: they must be the model's and
    the trainer's own."""
    model, train = ModelConfig(VOCAB, VOCAB), {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    default = Recipe()
    assert (default.dropout, default.attention_dropout, default.activation_dropout) == (
        model.dropout, model.attention_dropout, model.activation_dropout,
    )  # fmt: skip
    assert default.amp == train["amp"]


def test_parameter_count_equals_the_built_model() -> None:
    for enc, dec, d, ffn, heads in ((1, 1, 64, 256, 4), (3, 2, 96, 384, 4)):
        shape = Shape(enc, dec, d, ffn, heads, VOCAB)
        built = sum(p.numel() for p in _model(enc, dec, shape, (0.1, 0.0, 0.0)).parameters())
        assert parameter_count(shape) == built


def test_checkpointing_accumulation_and_16_bit() -> None:
    deep = Shape(60, 12, 512, 2048, 8, 40000)
    plain = estimate_training_memory(deep, 3584, Recipe(amp="none"))
    half = estimate_training_memory(deep, 3584, Recipe(amp="bf16"))
    checkpointed = estimate_training_memory(deep, 3584, Recipe(amp="bf16"), checkpointing=True)
    accumulating = estimate_training_memory(deep, 3584, Recipe(amp="bf16"), update_freq=8)
    # 16-bit matmul tensors, but the residual stream and the LayerNorms stay fp32
    assert 0.5 * plain.activations_gb < half.activations_gb < 0.7 * plain.activations_gb
    assert checkpointed.activations_gb < half.activations_gb / 5  # 72 fp32 layer inputs + one layer
    # fp32 weights and Adam, autocast's 16-bit copies; the gradients while micro-batches accumulate
    assert plain.static_gb == pytest.approx(plain.params * 12 / 1e9)
    assert half.static_gb == pytest.approx(plain.params * 14 / 1e9)
    assert accumulating.static_gb == pytest.approx(plain.params * 18 / 1e9)
    with pytest.raises(ValueError, match="amp"):
        Recipe(amp="fp8")
