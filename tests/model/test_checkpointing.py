"""Activation checkpointing recomputes each layer in backward and gives the gradients of a run
without it, dropout included (the trainer's per-micro-batch generator and SDPA's global RNG)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.cli import main
from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.dropout import dropout_generator


def gradients(residual: str, checkpointing: bool) -> tuple[float, dict[str, torch.Tensor]]:
    cfg = ModelConfig(40, 40, encoder_layers=3, decoder_layers=2, d_model=16, ffn_dim=32, heads=2,
                      residual=residual, dropout=0.3, attention_dropout=0.2, activation_dropout=0.1)  # fmt: skip
    torch.manual_seed(0)
    model = build_model(cfg).train()
    model.set_activation_checkpointing(checkpointing)
    g = torch.Generator().manual_seed(5)
    src, prev = torch.randint(4, 40, (4, 7), generator=g), torch.randint(4, 40, (4, 6), generator=g)
    src[1, 5:] = 0
    torch.manual_seed(1)  # SDPA's attention dropout draws from the global generator
    with dropout_generator(torch.Generator().manual_seed(7)):
        loss = F.cross_entropy(model(src, prev).flatten(0, 1), prev.flatten())
        loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("residual", ["post_ln", "admin", "b2t", "resi_dual", "dlcl"])
def test_checkpointed_layers_give_the_same_loss_and_gradients(residual: str) -> None:
    loss, grads = gradients(residual, checkpointing=False)
    loss_ckpt, grads_ckpt = gradients(residual, checkpointing=True)
    assert loss_ckpt == loss
    assert grads.keys() == grads_ckpt.keys() and len(grads) > 20
    for name, grad in grads.items():
        torch.testing.assert_close(grads_ckpt[name], grad, rtol=1e-6, atol=1e-7, msg=name)


def test_recomputation_really_happens_in_backward() -> None:
    cfg = ModelConfig(40, 40, encoder_layers=2, decoder_layers=1, d_model=16, ffn_dim=32, heads=2)
    model = build_model(cfg).train()
    calls = []
    model.encoder.layers[0].ffn.register_forward_hook(lambda *a: calls.append(torch.is_grad_enabled()))
    src, prev = torch.randint(4, 40, (2, 5)), torch.randint(4, 40, (2, 4))
    model.set_activation_checkpointing(True)
    model(src, prev).sum().backward()
    assert len(calls) == 2  # forward, then the recomputation during backward
    calls.clear()
    model.set_activation_checkpointing(False)
    model(src, prev).sum().backward()
    assert len(calls) == 1


def test_train_cli_with_checkpoint_activations_logs_the_same_losses(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    bin_dir = make_bin_dir(tmp_path / "data")
    runs = {}
    for name, extra in (("plain", []), ("ckpt", ["--checkpoint-activations"])):
        argv = train_args(bin_dir, tmp_path / name, "--max-update", "6", "--dropout", "0.2", *extra)
        assert main(argv) == 0
        runs[name] = [r["loss"] for r in read_log(tmp_path / name)]
    assert len(runs["plain"]) == 6 and runs["ckpt"] == runs["plain"]
