"""Mutation gaps of update (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: the gradient of the summed cross-entropy per target token of the
update, taken with torch's own autograd on a copy of the model, the global norm and fairseq's clipping
written out, and an Adam step worked by hand."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.train.batching import Batch
from pipeline_lib.train.build import Context, build_optimizer, build_scaler
from pipeline_lib.train.collectives import Ranks
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.update import Updater, to_device

PAD, BOS, EOS, VOCAB = 0, 1, 2, 30


def batch(rows: list[list[int]], src_len: int = 4) -> Batch:
    g = torch.Generator().manual_seed(len(rows) * 7 + src_len)
    width = max(len(r) for r in rows) + 1
    target = torch.full((len(rows), width), PAD)
    prev = torch.full((len(rows), width), PAD)
    for i, r in enumerate(rows):
        target[i, : len(r) + 1] = torch.tensor(r + [EOS])
        prev[i, : len(r) + 1] = torch.tensor([BOS] + r)
    src = torch.randint(3, VOCAB, (len(rows), src_len), generator=g)
    ntokens = sum(len(r) + 1 for r in rows)
    return Batch(src, prev, target, torch.arange(len(rows)), ntokens)


BATCHES = [batch([[5, 6, 7], [8]]), batch([[9, 10], [11, 12, 13, 14]], src_len=3)]
TOTAL = sum(b.ntokens for b in BATCHES)


def updater(cpu_workers: int = 1, **kw) -> Updater:
    fields = dict(data="d", source_lang="en", target_lang="fr", save_dir="s", max_update=10,
                  label_smoothing=0.0, clip_norm=0.0, cpu_workers=cpu_workers, optimizer="adam",
                  warmup_init_lr=1e-3, lr=1e-3, warmup_updates=0, adam_betas=(0.9, 0.98), adam_eps=1e-8)  # fmt: skip
    cfg = TrainConfig(**{**fields, **kw})
    torch.manual_seed(0)
    model = build_model(ModelConfig(VOCAB, VOCAB, encoder_layers=1, decoder_layers=1, d_model=16, ffn_dim=32,
                                    heads=2, dropout=0.0, pad_idx=PAD))  # fmt: skip
    params = list(model.parameters())
    cpu = torch.device("cpu")
    return Updater(
        cfg, Context(VOCAB, None, PAD, BOS, EOS), model, params, build_optimizer(cfg, params),
        build_scaler(cfg, cpu), Ranks(cpu, False, 1, 0), None, chunked_loss=False,
    )  # fmt: skip


def reference_gradients(model) -> tuple[float, list[torch.Tensor]]:
    """(summed nll in nats, d(sum of cross-entropies / target tokens of the update) / d params)."""
    clone = copy.deepcopy(model).train()
    total = 0.0
    loss = 0.0
    for b in BATCHES:
        logits = clone(b.src_tokens, b.prev_tokens)
        nll = F.cross_entropy(
            logits.reshape(-1, VOCAB), b.target.reshape(-1), ignore_index=PAD, reduction="sum"
        )
        loss = loss + nll
        total += nll.item()
    (loss / TOTAL).backward()
    return total, [p.grad for p in clone.parameters()]


@pytest.mark.parametrize("cpu_workers", [1, 2])
def test_gradients_are_per_target_token_of_the_whole_update(cpu_workers: int) -> None:
    up = updater(cpu_workers)
    expected_loss, expected = reference_gradients(up.model)
    loss_sum, nll_sum = up.accumulate_gradients(BATCHES, TOTAL, update=0)
    assert loss_sum.item() == pytest.approx(expected_loss, rel=1e-5) and nll_sum.item() == pytest.approx(
        expected_loss, rel=1e-5
    )
    for p, g in zip(up.params, expected, strict=True):
        if g is None:
            assert p.grad is None or not p.grad.any()
        else:
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("clip", [0.0, 1e-3, 1e6])
def test_the_norm_is_the_global_l2_norm_and_clipping_fairseqs(clip: float) -> None:
    up = updater(clip_norm=clip)
    up.accumulate_gradients(BATCHES, TOTAL, update=0)
    grads = [p.grad.detach().clone() for p in up.params if p.grad is not None]
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    loss_sum, nll_sum, gnorm = up.unscale_and_clip(torch.tensor(3.5), torch.tensor(2.5)).tolist()
    assert (loss_sum, nll_sum) == (3.5, 2.5) and gnorm == pytest.approx(norm, rel=1e-5)
    factor = min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0  # fairseq: max_norm / (norm + 1e-6)
    after = [p.grad for p in up.params if p.grad is not None]
    for g, a in zip(grads, after, strict=True):
        torch.testing.assert_close(a, g * factor, rtol=1e-5, atol=1e-9)


def test_a_step_is_adam_on_the_normalised_gradient_and_clears_it() -> None:
    up = updater()
    before = [p.detach().clone() for p in up.params]
    loss_sum, nll_sum, gnorm, stepped = up.train_step(BATCHES, TOTAL, update=0)
    assert stepped and math.isfinite(gnorm) and loss_sum == pytest.approx(nll_sum)
    # Adam's first step moves every parameter with a gradient by lr x g / (|g| + eps'), about lr
    moved = [float((p.detach() - b).abs().max()) for p, b in zip(up.params, before, strict=True)]
    assert max(moved) == pytest.approx(1e-3, rel=1e-2)
    assert all(p.grad is None for p in up.params)
    assert up.loss_scale() is None


def test_a_non_finite_update_is_not_taken() -> None:
    up = updater()
    with torch.no_grad():
        up.model.decoder.layers[0].ffn.fc2.bias.fill_(math.inf)
    before = [p.detach().clone() for p in up.params]
    *_, stepped = up.train_step(BATCHES, TOTAL, update=0)
    assert not stepped
    for p, b in zip(up.params, before, strict=True):
        assert torch.equal(p.detach(), b)
    assert all(p.grad is None for p in up.params)


def test_dropout_masks_come_from_the_seed_the_update_and_the_micro_batch() -> None:
    def grads(seed: int, update: int, workers: int = 1) -> list[torch.Tensor]:
        up = updater(workers, seed=seed)
        up.model.encoder.layers[0].ffn.activation_dropout.p = 0.5
        up.accumulate_gradients(BATCHES, TOTAL, update=update)
        return [p.grad.clone() for p in up.params if p.grad is not None]

    same = grads(1, 3)
    assert all(torch.equal(a, b) for a, b in zip(same, grads(1, 3), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(same, grads(1, 4), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(same, grads(2, 3), strict=True))
    threaded = grads(1, 3, workers=2)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-8) for a, b in zip(same, threaded, strict=True))


def test_a_cpu_batch_stays_put() -> None:
    b = BATCHES[0]
    moved = to_device(b, torch.device("cpu"))
    assert torch.equal(moved.src_tokens, b.src_tokens) and moved.ntokens == b.ntokens
