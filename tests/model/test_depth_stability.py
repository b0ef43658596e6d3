"""A deep post-LN encoder stalls where Admin and pre-LN train (the Admin paper's claim, at toy scale).

Reverse task: the target is the source read backwards, so the decoder must attend by position
through an 18-layer encoder. Same data, seed, Adam(0.9, 0.98), lr 1e-3 and a short 40-update warmup
for all three variants.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.admin import apply_profile, profile_model

VOCAB, BATCH, UPDATES, WARMUP, LR = 24, 64, 300, 40, 1e-3


def reverse_batch(generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    length = int(torch.randint(6, 11, (1,), generator=generator))
    tokens = torch.randint(4, VOCAB, (BATCH, length), generator=generator)
    eos, bos = torch.full((BATCH, 1), 2), torch.full((BATCH, 1), 1)
    reversed_tokens = tokens.flip(1)
    return (
        torch.cat([tokens, eos], 1),
        torch.cat([bos, reversed_tokens], 1),
        torch.cat([reversed_tokens, eos], 1),
    )


def train_curve(residual: str) -> list[float]:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, encoder_layers=18, decoder_layers=2,
        d_model=64, ffn_dim=128, heads=4, residual=residual, dropout=0.1,
    )  # fmt: skip
    model = build_model(config)
    data = torch.Generator().manual_seed(1)

    def loss_on(m: torch.nn.Module, batch) -> torch.Tensor:
        src, prev, tgt = batch
        return F.cross_entropy(m(src, prev).flatten(0, 1), tgt.flatten())

    if residual == "admin":
        first = reverse_batch(data)
        apply_profile(model, profile_model(model, lambda m: loss_on(m, first), {}))
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda u: min((u + 1) / WARMUP, math.sqrt(WARMUP / (u + 1)))
    )
    losses = []
    for _ in range(UPDATES):
        loss = loss_on(model, reverse_batch(data))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~1 min on an idle 2-core machine; generous when the CPU is shared
def test_deep_post_ln_is_worse_than_admin_and_pre_ln() -> None:
    torch.set_num_threads(2)
    curves = {name: train_curve(name) for name in ("post_ln", "admin", "pre_ln")}
    final = {name: sum(c[-50:]) / 50 for name, c in curves.items()}
    for name, curve in curves.items():
        points = " ".join(f"{sum(curve[i : i + 50]) / 50:.3f}" for i in range(0, UPDATES, 50))
        print(f"18L-2L {name:8s} mean loss per 50 updates: {points}")
    uniform = math.log(VOCAB - 4)
    assert final["post_ln"] > 0.8 * uniform  # stalled near a unigram guess
    assert final["admin"] < final["post_ln"] - 0.5
    assert final["pre_ln"] < final["post_ln"] - 0.5
