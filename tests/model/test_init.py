"""Glorot and Lipschitz-restricted initialisation bounds."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from pipeline_lib.model import ModelConfig, build_model


def build(init: str, residual: str = "post_ln") -> nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=300, tgt_vocab_size=300, encoder_layers=2, decoder_layers=2,
        d_model=64, ffn_dim=256, heads=4, init=init, residual=residual,
    )  # fmt: skip
    return build_model(config)


@pytest.mark.parametrize("residual", ["post_ln", "pre_ln", "dlcl"])
def test_lipschitz_bounds_hold_and_are_used(residual: str) -> None:
    model = build("lipschitz", residual)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear) and m is not model.output_projection]
    assert linears
    for linear in linears:
        bound = 1.0 / math.sqrt(linear.in_features)
        peak = linear.weight.abs().max().item()
        assert peak <= bound + 1e-7
        assert peak > 0.9 * bound  # uniform over the whole interval, not a narrower law
        assert torch.count_nonzero(linear.bias) == 0
    table = model.encoder.embed.table.weight
    bound = math.sqrt(2.0 / (64 + 300))
    assert table.abs().max().item() <= bound + 1e-7 and table.abs().max().item() > 0.9 * bound
    assert torch.count_nonzero(table[0]) == 0  # padding row
    for norm in (m for m in model.modules() if isinstance(m, nn.LayerNorm)):
        assert torch.equal(norm.weight, torch.ones_like(norm.weight))
        assert torch.equal(norm.bias, torch.zeros_like(norm.bias))


def test_xavier_default_bounds() -> None:
    model = build("xavier")
    qkv = model.encoder.layers[0].self_attn.qkv_proj.weight
    fc1 = model.encoder.layers[0].ffn.fc1.weight
    for weight in (qkv, fc1):
        # U(-b, b) with b = sqrt(6 / (fan_in + fan_out)): inside the bound, reaching it, std b / sqrt(3).
        bound = math.sqrt(6.0 / (weight.shape[0] + weight.shape[1]))
        assert weight.abs().max().item() <= bound + 1e-7
        assert weight.abs().max().item() > 0.95 * bound
        assert abs(weight.std().item() - bound / math.sqrt(3.0)) < 0.05 * bound / math.sqrt(3.0)
    table = model.encoder.embed.table.weight[1:]
    assert abs(table.std().item() - 64**-0.5) < 0.01  # N(0, d^-0.5)
    assert torch.count_nonzero(model.encoder.embed.table.weight[0]) == 0
