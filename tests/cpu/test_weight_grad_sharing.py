"""Weight-gradient products shared between CPU workers (pipeline_lib/cpu/weight_grad_sharing.py)
give exactly the gradients that backward computes itself, whoever computes them."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from pipeline_lib.cpu.onednn import defer_weight_grads, onednn_available, set_cpu_gemm
from pipeline_lib.cpu.threads import single_intra_op_thread
from pipeline_lib.cpu.weight_grad_sharing import SharedWeightGrads, run_micro_batches
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")


def _model(tied: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=40, tgt_vocab_size=40, encoder_layers=2, decoder_layers=2,
                         d_model=32, ffn_dim=64, heads=4, dropout=0.0, share_all_embeddings=tied,
                         share_decoder_input_output_embed=tied)  # fmt: skip
    model = build_model(config)
    set_cpu_gemm(model, "onednn")
    return model


def _batches(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [
        (torch.randint(4, 40, (5 + i, 7 + i), generator=gen), torch.randint(4, 40, (5 + i, 6), generator=gen))
        for i in range(count)
    ]


def _grads(model, batch, queue=None) -> list[torch.Tensor | None]:
    params = list(model.parameters())
    src, prev = batch
    if queue is None:
        return list(torch.autograd.grad(model(src, prev).square().mean(), params, allow_unused=True))
    with defer_weight_grads(queue):
        return list(torch.autograd.grad(model(src, prev).square().mean(), params, allow_unused=True))


def _filled(model, grads, shared: SharedWeightGrads, index: int) -> list[torch.Tensor | None]:
    return shared.complete(index, list(model.parameters()), grads)


def _assert_same(got: list[torch.Tensor | None], want: list[torch.Tensor | None]) -> None:
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            assert torch.equal(g, w)


def _start_helper(shared: SharedWeightGrads) -> threading.Thread:
    helper = threading.Thread(target=shared.help_others)
    helper.start()
    _wait_for(lambda: shared.helpers == 1)
    return helper


def _wait_for(condition) -> None:
    deadline = time.monotonic() + 60
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


@needs_onednn
def test_without_an_idle_worker_backward_computes_its_own_products() -> None:
    model = _model()
    batch = _batches(1)[0]
    want = _grads(model, batch)
    shared = SharedWeightGrads(1)
    got = _grads(model, batch, shared.queue(0))
    # qkv, out, fc1, fc2 per encoder layer; qkv, out, cross q, kv, out, fc1, fc2 per decoder layer,
    # and the output layer
    assert len(shared.products[0]) == 2 * 4 + 2 * 7 + 1
    assert all(product.result is not None for product in shared.products[0])  # none was queued
    shared.finish(0)
    _assert_same(_filled(model, got, shared, 0), want)


@needs_onednn
def test_a_tied_output_layer_gets_both_gradients() -> None:
    """The output layer's product is deferred; the embedding lookup's gradient still comes from
    autograd, and the two add up to backward's own gradient (up to the order of the sum)."""
    model = _model(tied=True)
    batch = _batches(1)[0]
    want = _grads(model, batch)
    shared = SharedWeightGrads(1)
    got = _grads(model, batch, shared.queue(0))
    shared.finish(0)
    embedding = model.output_projection.weight
    assert model.encoder.embed.table.weight is embedding
    position = [k for k, p in enumerate(model.parameters()) if p is embedding]
    assert len(position) == 1 and got[position[0]] is not None  # the lookup's part
    for g, w in zip(_filled(model, got, shared, 0), want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@needs_onednn
def test_an_idle_worker_computes_the_products_of_a_running_backward() -> None:
    model = _model()
    batch = _batches(1)[0]
    want = _grads(model, batch)
    shared = SharedWeightGrads(2)
    shared.finish(0)  # micro-batch 0 is done: its worker waits for the others' products
    helper = _start_helper(shared)
    got = _grads(model, batch, shared.queue(1))
    _wait_for(lambda: shared.taken_by_helpers == len(shared.products[1]))
    helper.join(timeout=0.5)
    assert helper.is_alive()  # micro-batch 1 is not finished: the helper waits for more products
    shared.finish(1)
    helper.join(timeout=30)
    assert not helper.is_alive()
    _assert_same(_filled(model, got, shared, 1), want)


@needs_onednn
def test_a_full_queue_leaves_products_to_their_owner() -> None:
    model = _model()
    shared = SharedWeightGrads(2, queue_bytes=0)
    shared.finish(0)
    helper = _start_helper(shared)
    _grads(model, _batches(1)[0], shared.queue(1))
    shared.finish(1)
    helper.join(timeout=30)
    assert not helper.is_alive()
    assert shared.taken_by_helpers == 0 and len(shared.products[1]) > 0


@needs_onednn
def test_workers_sharing_products_give_each_micro_batchs_gradients() -> None:
    """Four micro-batches over two threads, as the trainer runs them."""
    model = _model()
    batches = _batches(4)
    with single_intra_op_thread():  # reductions (bias, LayerNorm) round differently on 2 threads
        want = [_grads(model, b) for b in batches]
    with single_intra_op_thread():
        got, shared = run_micro_batches(len(batches), 2, lambda i: _grads(model, batches[i]))
    assert len(shared.products) == len(batches) and all(shared.products)
    for i in range(len(batches)):
        _assert_same(_filled(model, got[i], shared, i), want[i])


def test_products_of_one_weight_are_summed_in_backwards_order() -> None:
    weight = torch.zeros(3, 2)
    shared = SharedWeightGrads(1)
    gen = torch.Generator().manual_seed(0)
    pairs = [(torch.randn(5, 3, generator=gen), torch.randn(5, 2, generator=gen)) for _ in range(3)]
    for grad_out, inputs in pairs:
        shared.queue(0).defer(weight, grad_out, inputs)
    shared.finish(0)
    want = pairs[0][0].t() @ pairs[0][1]
    want = want + pairs[1][0].t() @ pairs[1][1]
    want = want + pairs[2][0].t() @ pairs[2][1]
    assert torch.equal(shared.complete(0, [weight], [None])[0], want)


def test_an_abandoned_micro_batch_releases_the_helpers() -> None:
    shared = SharedWeightGrads(2)
    shared.finish(0)
    helper = _start_helper(shared)
    helper.join(timeout=0.5)
    assert helper.is_alive()  # waits for micro-batch 1
    shared.abandon(1)  # its backward raised
    helper.join(timeout=30)
    assert not helper.is_alive()
