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
from pipeline_lib.train import update as update_module
from pipeline_lib.train.batching import Batch
from pipeline_lib.train.build import Context, build_fp16_master, build_optimizer, build_scaler
from pipeline_lib.train.collectives import Ranks
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.pending_update import HostStats, JudgedUpdate, PendingUpdate, UpdateInfo
from pipeline_lib.train.run_state import update_seed
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
    assert unchanged(up.params, before)
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


# --------------------------------------------------------------------------- --deferred-stats
# step_without_reading / conclude / replay. Oracles: the L2 norm and fairseq's clip written out, fairseq
# Adam's first step written out, parameters and optimizer state saved before the step, the loss scale
# worked by hand from each scaler's rule, and hand-made statistics vectors for conclude's reading.

INFO = UpdateInfo(batches=2, sentences=4, total_tokens=TOTAL)
LR, BETA2, EPS = 1e-3, 0.98, 1e-8  # updater()'s Adam settings


def adam_first_step(p: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor:
    """fairseq Adam's first step written out: m = (1 - b1) g, v = (1 - b2) g^2, step size
    lr sqrt(1 - b2) / (1 - b1), eps outside: p - lr g / (|g| + eps / sqrt(1 - b2))."""
    if g is None:
        return p
    return p - LR * g / (g.abs() + EPS / math.sqrt(1 - BETA2))


def l2(grads: list[torch.Tensor | None]) -> float:
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads if g is not None))


def grads_of(params: list[torch.Tensor]) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.detach().clone() for p in params]


def saved(params: list[torch.Tensor]) -> list[torch.Tensor]:
    return [p.detach().clone() for p in params]


def unchanged(params: list[torch.Tensor], before: list[torch.Tensor]) -> bool:
    return all(torch.equal(p.detach(), b) for p, b in zip(params, before, strict=True))


def assert_equal(params: list[torch.Tensor], before: list[torch.Tensor]) -> None:
    assert unchanged(params, before)


def saved_state(optimizer: torch.optim.Optimizer) -> list[dict]:
    return [
        {k: v.clone() if torch.is_tensor(v) else v for k, v in optimizer.state[p].items()}
        for group in optimizer.param_groups
        for p in group["params"]
    ]


def assert_same_state(optimizer: torch.optim.Optimizer, before: list[dict]) -> None:
    after = saved_state(optimizer)
    assert len(after) == len(before)
    for a, b in zip(after, before, strict=True):
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) if torch.is_tensor(b[k]) else a[k] == b[k] for k in b)


def fp16_updater(**kw) -> Updater:
    """--amp fp16 --deferred-stats. TrainConfig refuses fp16 with --device cpu (a GPU mode), so the config
    says cuda while the model, torch's GradScaler and the updater run on the CPU, without autocast: the
    scaled gradients are then 2^16 x the fp32 ones, exactly."""
    return updater(amp="fp16", deferred_stats=True, device="cuda", **kw)


def fairseq_updater(**kw) -> Updater:
    """--amp fairseq_fp16 --deferred-stats, built as the trainer builds it: fp16 model, fp32 masters that
    the optimizer updates, fairseq's scaler (the GradScaler stays disabled)."""
    up = updater(amp="fairseq_fp16", deferred_stats=True, **kw)
    master = build_fp16_master(up.cfg, up.model, world_size=1)
    optimizer = build_optimizer(up.cfg, master.masters)
    return Updater(
        up.cfg, up.ctx, up.model, up.params, optimizer, up.scaler, up.ranks, None, chunked_loss=False,
        fp16_master=master,
    )  # fmt: skip


def poison_a_gradient(up: Updater) -> None:
    """An overflow: one infinite gradient element (in the fp16 model's gradients with fairseq_fp16)."""
    with torch.no_grad():
        up.model.decoder.layers[0].ffn.fc2.bias.grad[0] = math.inf


@pytest.mark.parametrize("clip", [0.0, 1e-3])
def test_a_deferred_step_is_adam_on_the_clipped_gradient_and_the_stats_wait(clip: float) -> None:
    up = updater(clip_norm=clip, deferred_stats=True)
    assert up.undo is None  # without a loss scaler nothing is taken back
    expected_loss, expected = reference_gradients(up.model)
    before = saved(up.params)
    loss_acc, nll_acc = up.accumulate_gradients(BATCHES, TOTAL, update=0)
    grads = grads_of(up.params)
    for g, e in zip(grads, expected, strict=True):
        if e is not None:
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-7)
    stats = up.step_without_reading(loss_acc, nll_acc)
    assert isinstance(stats, HostStats) and stats.ready is None and stats.values.dtype == torch.float64
    norm = l2(grads)
    loss_sum, nll_sum, gnorm = stats.read()
    assert loss_sum == pytest.approx(expected_loss, rel=1e-5)
    assert nll_sum == pytest.approx(expected_loss, rel=1e-5)
    assert gnorm == pytest.approx(norm, rel=1e-5)  # the norm before clipping
    factor = min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0  # fairseq's clip
    for p, b, g in zip(up.params, before, grads, strict=True):
        torch.testing.assert_close(
            p.detach(), adam_first_step(b, None if g is None else g * factor), rtol=0, atol=1e-7
        )
    moved = max(float((p.detach() - b).abs().max()) for p, b in zip(up.params, before, strict=True))
    assert moved == pytest.approx(LR, rel=1e-2)  # about lr where |g| >> eps
    assert all(p.grad is None for p in up.params)
    after = saved(up.params)
    judged = up.conclude(PendingUpdate(INFO, stats))
    assert judged == JudgedUpdate(INFO, loss_sum, nll_sum, gnorm, True)
    assert_equal(up.params, after)  # judged, not taken back
    assert up.loss_scale() is None


def test_conclude_reads_loss_nll_norm_flag_and_scale_in_that_order() -> None:
    """Hand-made statistics vectors: [loss, nll, gnorm] and with --amp fp16 [.., found_inf, scale]."""
    up = updater(deferred_stats=True)
    judged = up.conclude(PendingUpdate(INFO, HostStats(torch.tensor([3.5, 2.5, 1.25], dtype=torch.float64))))
    assert judged == JudgedUpdate(INFO, 3.5, 2.5, 1.25, True)
    # without a loss scaler a non-finite update stepped: the divergence rule ends the run when it reads it
    nan = up.conclude(PendingUpdate(INFO, HostStats(torch.tensor([math.inf, 2.5, math.nan]).double())))
    assert nan.stepped and nan.loss_sum == math.inf and math.isnan(nan.gnorm)
    fp16 = fp16_updater()
    judged = fp16.conclude(
        PendingUpdate(INFO, HostStats(torch.tensor([3.5, 2.5, 1.25, 0.0, 1024.0]).double()))
    )
    assert judged == JudgedUpdate(INFO, 3.5, 2.5, 1.25, True)
    assert fp16.loss_scale() == 1024.0  # the scale read with the statistics ...
    fp16.scaler.scale(torch.ones(()))  # the scaler's scale tensor exists once it has scaled something
    fp16.scaler.update(new_scale=8.0)
    assert fp16.loss_scale() == 1024.0  # ... not the scaler's, which would wait on the device


def test_fp16_deferred_steps_report_the_scalers_flag_and_scale_and_an_overflow_is_taken_back() -> None:
    up = fp16_updater()
    assert up.undo is not None and up.scaler.get_scale() == 2.0**16  # GradScaler's init scale
    expected_loss, expected = reference_gradients(up.model)
    # a clean update: scaled gradients, unscaled before the norm and the step
    before = saved(up.params)
    loss_acc, nll_acc = up.accumulate_gradients(BATCHES, TOTAL, update=0)
    grads = [None if g is None else g / 2.0**16 for g in grads_of(up.params)]
    for g, e in zip(grads, expected, strict=True):
        if e is not None:
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-7)
    stats = up.step_without_reading(loss_acc, nll_acc)
    values = stats.read()
    assert len(values) == 5
    assert values[0] == pytest.approx(expected_loss, rel=1e-5)
    assert values[1] == pytest.approx(expected_loss, rel=1e-5)
    assert values[2] == pytest.approx(l2(grads), rel=1e-5)
    assert values[3] == 0.0 and values[4] == 2.0**16  # no inf; the scale grows only after 2000 clean steps
    for p, b, g in zip(up.params, before, grads, strict=True):
        torch.testing.assert_close(p.detach(), adam_first_step(b, g), rtol=0, atol=1e-7)
    assert all(p.grad is None for p in up.params)
    stepped = saved(up.params)
    judged = up.conclude(PendingUpdate(INFO, stats))
    assert judged == JudgedUpdate(INFO, *values[:3], True)
    assert_equal(up.params, stepped)
    assert up.loss_scale() == 2.0**16
    # an overflow: the step is taken, then taken back when its statistics are read
    state = saved_state(up.optimizer)
    assert all(s["step"] == 1 for s in state)
    loss_acc, nll_acc = up.accumulate_gradients(BATCHES, TOTAL, update=1)
    poison_a_gradient(up)
    stats = up.step_without_reading(loss_acc, nll_acc)
    values = stats.read()
    assert values[2] == math.inf and values[3] == 1.0 and values[4] == 2.0**15  # backoff_factor 0.5
    assert not unchanged(up.params, stepped)
    assert all(p.grad is None for p in up.params)
    judged = up.conclude(PendingUpdate(INFO, stats))
    assert not judged.stepped and judged.gnorm == math.inf
    assert_equal(up.params, stepped)
    assert_same_state(up.optimizer, state)
    assert up.loss_scale() == 2.0**15 and up.scaler.get_scale() == 2.0**15


def test_fp16_an_overflow_on_the_first_step_leaves_no_optimizer_state() -> None:
    up = fp16_updater()
    before = saved(up.params)
    loss_acc, nll_acc = up.accumulate_gradients(BATCHES, TOTAL, update=0)
    poison_a_gradient(up)
    judged = up.conclude(PendingUpdate(INFO, up.step_without_reading(loss_acc, nll_acc)))
    assert not judged.stepped
    assert_equal(up.params, before)
    assert len(up.optimizer.state) == 0  # as if the step never happened: Adam starts afresh
    assert up.loss_scale() == 2.0**15


def test_fairseq_fp16_deferred_steps_move_the_masters_and_an_overflow_restores_model_and_masters() -> None:
    # scale window 1: fairseq's scaler doubles after every clean update and halves on an overflow
    # (tolerance 0), so 128 -> 256 -> 128
    up = fairseq_updater(fp16_scale_window=1)
    master = up.fp16_master
    assert master is not None and up.undo is not None and up.loss_scale() == 128.0
    masters = master.masters
    expected_loss, _ = reference_gradients(copy.deepcopy(up.model).float())
    before = saved(masters)
    loss_acc, nll_acc = up.accumulate_gradients(BATCHES, TOTAL, update=0)
    # the fp16 gradients of 128 x the summed loss, into fp32 and times 1 / (target tokens x 128)
    grads = [None if g is None else g.float() * (1 / TOTAL / 128.0) for g in grads_of(up.params)]
    stats = up.step_without_reading(loss_acc, nll_acc)
    values = stats.read()
    assert len(values) == 3 and values[0] == pytest.approx(expected_loss, rel=1e-2)
    assert values[2] == pytest.approx(l2(grads), rel=1e-5)
    for m, b, g in zip(masters, before, grads, strict=True):
        torch.testing.assert_close(m.detach(), adam_first_step(b, g), rtol=0, atol=1e-7)
    for p, m in zip(up.params, masters, strict=True):
        assert p.dtype == torch.float16 and torch.equal(p.detach(), m.detach().half())  # copied back
    assert all(p.grad is None for p in up.params) and all(m.grad is None for m in masters)
    stepped_masters, stepped_model = saved(masters), saved(up.params)
    judged = up.conclude(PendingUpdate(INFO, stats))
    assert judged == JudgedUpdate(INFO, *values, True)
    assert_equal(masters, stepped_masters)
    assert_equal(up.params, stepped_model)
    assert up.loss_scale() == 256.0
    # an overflow, found by the infinite norm: scale halved, masters and model as before the step
    state = saved_state(up.optimizer)
    loss_acc, nll_acc = up.accumulate_gradients(BATCHES, TOTAL, update=1)
    poison_a_gradient(up)
    stats = up.step_without_reading(loss_acc, nll_acc)
    assert stats.read()[2] == math.inf
    assert not unchanged(up.params, stepped_model)
    judged = up.conclude(PendingUpdate(INFO, stats))
    assert not judged.stepped
    assert_equal(masters, stepped_masters)
    assert_equal(up.params, stepped_model)
    assert_same_state(up.optimizer, state)
    assert up.loss_scale() == 128.0


def test_replay_drops_the_stale_gradients_and_recomputes_the_update() -> None:
    up = updater(deferred_stats=True)
    expected_loss, expected = reference_gradients(up.model)
    for p in up.params:
        p.grad = torch.full_like(p, 7.0)  # the overflowed update's forward/backward, queued before
    loss_sum, nll_sum = up.replay(BATCHES, TOTAL, update=0)
    assert loss_sum.item() == pytest.approx(expected_loss, rel=1e-5)
    assert nll_sum.item() == pytest.approx(expected_loss, rel=1e-5)
    for p, e in zip(up.params, expected, strict=True):
        if e is None:
            assert p.grad is None or not p.grad.any()
        else:
            torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-7)


def test_replay_uses_the_given_update_for_dropout() -> None:
    """The dropout masks follow (seed, update): replaying update 3 gives update 3's gradients, as a
    first pass over it does, and not update 4's."""

    def dropout_updater() -> Updater:
        up = updater(deferred_stats=True, seed=1)
        up.model.encoder.layers[0].ffn.activation_dropout.p = 0.5
        return up

    def grads(update: int) -> list[torch.Tensor]:
        up = dropout_updater()
        up.accumulate_gradients(BATCHES, TOTAL, update=update)
        return [p.grad for p in up.params if p.grad is not None]

    up = dropout_updater()
    up.accumulate_gradients(BATCHES, TOTAL, update=4)
    up.replay(BATCHES, TOTAL, update=3)
    replayed = [p.grad for p in up.params if p.grad is not None]
    assert all(torch.equal(a, b) for a, b in zip(replayed, grads(3), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(replayed, grads(4), strict=True))


def test_fairseq_fp16_replay_uses_the_scale_after_the_overflow() -> None:
    """Replayed after an overflow: the loss is scaled by the scaler's present scale (128), not by the
    scale a clean update would have left (256, with window 1), which the queued pass used."""
    up = fairseq_updater(fp16_scale_window=1)
    _, expected = reference_gradients(copy.deepcopy(up.model).float())

    def off_by(scale: float) -> float:
        # d(scale x summed loss) = scale x target tokens x d(loss per target token); fp16: a tolerance
        got = torch.cat(
            [p.grad.float().flatten() for p, e in zip(up.params, expected, strict=True) if e is not None]
        )
        want = torch.cat([e.flatten() * (scale * TOTAL) for e in expected if e is not None])
        return float((got - want).norm() / want.norm())

    up.accumulate_gradients(BATCHES, TOTAL, update=0, unjudged=True)
    assert off_by(256.0) < 1e-2  # queued while the previous update is judged: its clean scale
    up.replay(BATCHES, TOTAL, update=0)
    assert off_by(128.0) < 1e-2


# DDP, autocast and the threaded path's unused parameters.


@pytest.fixture
def one_rank_group(tmp_path):
    """A real gloo process group of one rank, in this process."""
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        torch.distributed.destroy_process_group()


@pytest.fixture
def ddp_updater(one_rank_group) -> Updater:
    """An updater that trains as one rank of that group, wrapped in DDP."""
    up = updater()
    up.ranks = Ranks(torch.device("cpu"), True, 1, 0)
    up.wrap_ddp()
    return up


def test_distributed_updates_go_through_ddp_as_configured(ddp_updater: Updater) -> None:
    up = ddp_updater
    ddp = up.ddp
    assert isinstance(ddp, torch.nn.parallel.DistributedDataParallel) and ddp.module is up.model
    # buffers are not broadcast (fairseq's choice); gradients live in DDP's buckets; CPU: no device ids
    assert ddp.broadcast_buffers is False and ddp.gradient_as_bucket_view is True
    assert ddp.device_ids is None
    up.wrap_ddp()  # a second call keeps the one wrapper
    assert up.ddp is ddp
    expected_loss, expected = reference_gradients(up.model)
    loss_sum, _ = up.accumulate_gradients(BATCHES, TOTAL, update=0)
    assert loss_sum.item() == pytest.approx(expected_loss, rel=1e-5)
    for p, g in zip(up.params, expected, strict=True):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)


def test_without_a_process_group_there_is_no_ddp() -> None:
    up = updater()
    up.wrap_ddp()
    assert up.ddp is up.model


def test_autocast_uses_the_configured_dtype() -> None:
    up = updater()
    up.amp_dtype = torch.float16  # fp16 autocast exists on a CPU too; its default dtype there is bf16
    with up._autocast():
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16
    up.amp_dtype = None
    with up._autocast():
        assert not torch.is_autocast_enabled("cpu")


def test_threaded_accumulation_skips_an_unused_parameter_and_keeps_going() -> None:
    # a parameter no forward uses (autograd gives None for it) placed first: the ones after it still
    # get their gradients
    up = updater(cpu_workers=2)
    unused = torch.nn.Parameter(torch.zeros(3))
    up.params = [unused, *up.params]
    expected_loss, expected = reference_gradients(up.model)
    up.accumulate_gradients(BATCHES, TOTAL, update=0)
    assert unused.grad is None
    for p, g in zip(up.params[1:], expected, strict=True):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)


def test_ddp_syncs_once_per_update_in_the_last_micro_batchs_backward(ddp_updater: Updater) -> None:
    # a comm hook records which forward (1, 2, 3) the bucket all-reduce followed: no_sync before the last
    up = ddp_updater
    forwards, synced = [0], []

    def hook(state, bucket):
        synced.append(forwards[0])
        done = torch.futures.Future()
        done.set_result(bucket.buffer())
        return done

    up.ddp.register_comm_hook(None, hook)
    forward = up.forward_loss
    up.forward_loss = lambda b, module=None: forwards.__setitem__(0, forwards[0] + 1) or forward(b, module)
    three = [*BATCHES, batch([[7, 8]])]
    up.accumulate_gradients(three, TOTAL + three[-1].ntokens, update=0)
    assert synced == [3]
    # the statistics are summed over ranks: a one-rank sum is the rank's own
    stats = up.unscale_and_clip(torch.tensor(3.0), torch.tensor(2.0))
    assert stats[:2].tolist() == [3.0, 2.0]


def test_the_forward_runs_under_the_configured_autocast() -> None:
    seen = []
    up = updater()
    up.model.register_forward_pre_hook(
        lambda module, args: seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"))
    )
    up.forward_loss(BATCHES[0])
    up.amp_dtype = torch.bfloat16
    up.forward_loss(BATCHES[0])
    assert seen == [False, torch.bfloat16]


def test_an_updater_keeps_its_amp_dtype_and_chunked_loss(monkeypatch) -> None:
    # built with bf16 and the chunked loss: the forward runs under bf16 autocast (when not chunked) and
    # the chunked loss is the output-layer loss, on torch's matmul (no oneDNN routing here)
    up = updater()
    built = Updater(
        up.cfg,
        up.ctx,
        up.model,
        up.params,
        up.optimizer,
        up.scaler,
        up.ranks,
        torch.bfloat16,
        chunked_loss=True,
    )
    assert built.amp_dtype == torch.bfloat16 and built.chunked_loss is True
    calls = []
    real = update_module.output_layer_loss
    monkeypatch.setattr(update_module, "output_layer_loss", lambda *a, **k: calls.append(k) or real(*a, **k))
    expected_loss, _ = reference_gradients(up.model)
    loss = sum(built.forward_loss(b)[0].item() for b in BATCHES)
    assert len(calls) == 2 and all(k["onednn"] is False for k in calls)
    assert loss == pytest.approx(expected_loss, rel=1e-5)


def test_compiled_training_leaves_dropout_to_the_global_generator() -> None:
    assert updater(compile=True)._micro_batch_generator(0, 0) is None


def test_micro_batch_dropout_seeds() -> None:
    # (seed, update, (rank + 1) x 100,003 + micro-batch): distinct per rank and micro-batch
    up = updater(seed=3)
    assert up._micro_batch_generator(5, 2).initial_seed() == update_seed(3, 5, 100_003 + 2)
    up.ranks = Ranks(torch.device("cpu"), False, 2, 1)
    assert up._micro_batch_generator(5, 0).initial_seed() == update_seed(3, 5, 2 * 100_003)


@pytest.mark.parametrize(
    "stats, stepped",
    [([4.0, 3.0, 1.0], True), ([math.inf, 3.0, 1.0], False), ([4.0, 3.0, math.nan], False)],
)
def test_a_synchronous_step_is_taken_only_on_finite_loss_and_norm(monkeypatch, stats, stepped) -> None:
    # hand-made statistics in place of the real ones: train_step's decision alone
    up = updater()
    before = saved(up.params)
    monkeypatch.setattr(up, "unscale_and_clip", lambda loss, nll: torch.tensor(stats, dtype=torch.float64))
    result = up.train_step(BATCHES, TOTAL, update=0)
    assert result[3] is stepped
    assert unchanged(up.params, before) is not stepped


def test_amp_fp16_synchronous_steps_and_overflows() -> None:
    # torch's GradScaler on the CPU (see fp16_updater): a clean update steps on the unscaled gradient
    # and keeps the scale (2^16, growth only after 2,000 clean steps); an infinite gradient: no step,
    # the scale halves
    up = updater(amp="fp16", device="cuda")
    _, expected = reference_gradients(up.model)
    before = saved(up.params)
    assert up.train_step(BATCHES, TOTAL, update=0)[3] is True
    for p, b, e in zip(up.params, before, expected, strict=True):
        torch.testing.assert_close(p.detach(), adam_first_step(b, e), rtol=0, atol=1e-6)
    assert up.loss_scale() == 2.0**16
    accumulate = up.accumulate_gradients
    up.accumulate_gradients = lambda *a: (accumulate(*a), poison_a_gradient(up))[0]
    stepped_once = saved(up.params)
    assert up.train_step(BATCHES, TOTAL, update=1)[3] is False
    assert_equal(up.params, stepped_once)
    assert up.loss_scale() == 2.0**15


def test_fp16_deferred_loss_scale_before_any_judged_update_is_the_scalers() -> None:
    assert fp16_updater().loss_scale() == 2.0**16  # torch's initial scale: nothing judged yet
