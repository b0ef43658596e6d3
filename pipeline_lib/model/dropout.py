"""Dropout that draws from a generator chosen by the caller, per thread.

The trainer gives every micro-batch its own generator, seeded from (seed, update, micro-batch), so
dropout masks do not depend on which thread ran the micro-batch or in what order
(``--cpu-workers``). Without a generator (decoding, tests) this is ``nn.Dropout``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_local = threading.local()


@contextlib.contextmanager
def dropout_generator(generator: torch.Generator | None) -> Iterator[None]:
    """Dropout in this thread draws from ``generator`` inside the block."""
    previous = getattr(_local, "generator", None)
    _local.generator = generator
    try:
        yield
    finally:
        _local.generator = previous


class Dropout(nn.Dropout):
    def forward(self, x: Tensor) -> Tensor:
        generator = getattr(_local, "generator", None)
        if generator is None or not self.training or self.p == 0.0:
            return F.dropout(x, self.p, self.training)
        if self.p == 1.0:
            return x * 0.0
        # As ATen's CPU dropout: a Bernoulli keep-mask scaled by 1 / (1 - p).
        mask = torch.empty_like(x).bernoulli_(1.0 - self.p, generator=generator)
        return x * mask.div_(1.0 - self.p)
