"""Weight-gradient products that an idle CPU worker takes over (``--cpu-workers``).

With one micro-batch per worker, an update waits for the slower of the two passes. A linear layer's
weight gradient (``grad_out.T @ x``) depends on nothing that backward computes later, so the oneDNN
linear layers hand it here (``defer_weight_grads`` in ``pipeline_lib/cpu/onednn.py``). While no
worker is idle, the owner computes it at once, with its operands still in cache; once a worker has
run out of micro-batches, the others queue their products (up to a cap in bytes) and the idle worker
computes them while their owners go on with backward. Measurements: bench/HISTORY.md (2026-11-24).

Each product is computed whole by one thread and stored in its micro-batch's slot, and a micro-batch's
products for the same weight are summed in the order backward produced them, so the gradients do not
depend on which thread computed what.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from pipeline_lib.cpu.onednn import defer_weight_grads

T = TypeVar("T")

DEFAULT_QUEUE_BYTES = 64 << 20  # per micro-batch: ~2 encoder layers' products of a 2k-token d=256 batch


@dataclass(eq=False)
class WeightGradProduct:
    weight: Tensor
    grad_out: Tensor | None
    inputs: Tensor | None
    nbytes: int
    result: Tensor | None = None

    def compute(self) -> None:
        assert self.grad_out is not None and self.inputs is not None
        self.result = torch.mm(self.grad_out.t(), self.inputs)
        self.grad_out = self.inputs = None  # free them now, not when the update ends


class MicroBatchQueue:
    """What ``defer_weight_grads`` needs: where one micro-batch's backward sends its products."""

    def __init__(self, board: SharedWeightGrads, index: int) -> None:
        self.board = board
        self.index = index

    def defer(self, weight: Tensor, grad_out: Tensor, inputs: Tensor) -> None:
        self.board.defer(self.index, weight, grad_out, inputs)


class SharedWeightGrads:
    """The queues of one update's micro-batches, and the lock and condition the workers share."""

    def __init__(self, micro_batches: int, queue_bytes: int = DEFAULT_QUEUE_BYTES) -> None:
        self.queue_bytes = queue_bytes
        self.products: list[list[WeightGradProduct]] = [[] for _ in range(micro_batches)]
        self._pending: list[collections.deque[WeightGradProduct]] = [
            collections.deque() for _ in range(micro_batches)
        ]
        self._pending_bytes = [0] * micro_batches
        self._unfinished = micro_batches
        self._helpers = 0
        self.taken_by_helpers = 0
        self._cond = threading.Condition()

    def queue(self, index: int) -> MicroBatchQueue:
        return MicroBatchQueue(self, index)

    def defer(self, index: int, weight: Tensor, grad_out: Tensor, inputs: Tensor) -> None:
        product = WeightGradProduct(weight, grad_out, inputs, grad_out.nbytes + inputs.nbytes)
        with self._cond:
            self.products[index].append(product)
            # Queue it only for a worker that waits for work, which takes it right away: a product
            # left for later finds its operands out of cache.
            queue = self._helpers > 0 and self._pending_bytes[index] + product.nbytes <= self.queue_bytes
            if queue:
                self._pending[index].append(product)
                self._pending_bytes[index] += product.nbytes
                self._cond.notify_all()
        if not queue:
            product.compute()

    def _take(self, index: int) -> WeightGradProduct:
        product = self._pending[index].popleft()
        self._pending_bytes[index] -= product.nbytes
        return product

    def finish(self, index: int) -> None:
        """The owner's backward is done: compute what is left of its queue, oldest first."""
        while True:
            with self._cond:
                if not self._pending[index]:
                    self._unfinished -= 1
                    self._cond.notify_all()
                    return
                product = self._take(index)
            product.compute()

    def abandon(self, index: int) -> None:
        """The owner's backward failed: drop its products, so that no helper waits for it."""
        with self._cond:
            self._pending[index].clear()
            self._pending_bytes[index] = 0
            self._unfinished -= 1
            self._cond.notify_all()

    def help_others(self) -> None:
        """For a worker with no micro-batch left: take the others' products until every micro-batch
        is finished (a backward still running queues more while this worker waits)."""
        with self._cond:
            self._helpers += 1
        try:
            while True:
                with self._cond:
                    while True:
                        busy = [i for i, pending in enumerate(self._pending) if pending]
                        if busy or self._unfinished == 0:
                            break
                        self._cond.wait()
                    if not busy:
                        return
                    # the fullest queue: its owner is the furthest from done
                    index = max(busy, key=self._pending_bytes.__getitem__)
                    product = self._take(index)
                    self.taken_by_helpers += 1
                product.compute()
        finally:
            with self._cond:
                self._helpers -= 1

    @property
    def helpers(self) -> int:
        with self._cond:
            return self._helpers

    def complete(
        self, index: int, params: Sequence[Tensor], grads: Sequence[Tensor | None]
    ) -> list[Tensor | None]:
        """Micro-batch ``index``'s gradients: autograd's (one per parameter, None for the deferred
        weights) with its products added in, in the order backward produced them. A weight that is
        also used elsewhere (an output layer tied to the embeddings) gets both parts."""
        position = {id(param): k for k, param in enumerate(params)}
        complete = list(grads)
        for product in self.products[index]:
            assert product.result is not None, "complete() before the workers finished"
            k = position.get(id(product.weight))
            if k is None:
                raise RuntimeError("a linear layer deferred the gradient of a weight that is not a parameter")
            complete[k] = product.result if complete[k] is None else complete[k] + product.result
        return complete


def run_micro_batches(
    count: int, workers: int, micro_batch: Callable[[int], T]
) -> tuple[list[T], SharedWeightGrads]:
    """``micro_batch(i)`` for every i < ``count`` on ``workers`` threads, each call's backward
    deferring its weight-gradient products to queue i; a worker with no micro-batch left takes the
    others' products. Returns the calls' results in order, and the products for ``complete``."""
    shared = SharedWeightGrads(count)
    next_index = iter(range(count))
    lock = threading.Lock()
    results: dict[int, T] = {}

    def worker() -> None:
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                shared.help_others()
                return
            try:
                with defer_weight_grads(shared.queue(i)):
                    results[i] = micro_batch(i)
                shared.finish(i)
            except BaseException:
                shared.abandon(i)  # so that no helper waits for this micro-batch's products
                raise

    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(worker) for _ in range(workers)]:
            future.result()
    return [results[i] for i in range(count)], shared
