"""Dropout that draws from a generator chosen by the caller, per thread.

The trainer gives every micro-batch its own generator, seeded from (seed, update, micro-batch), so
dropout masks do not depend on which thread ran the micro-batch or in what order
(``--cpu-workers``). Without a generator (decoding, tests) this is ``nn.Dropout``.
"""

from __future__ import annotations

import contextlib
import math
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


# Keep-masks come from 16 random bits per element, four per 64-bit draw: the Mersenne Twister is
# the cost of CPU dropout, and one draw per element (bernoulli_, rand) takes ~2.6x as long. The drop
# probability is thereby rounded to a multiple of 1/65536, and the scale uses the rounded value.
_LEVELS = 1 << 16


def keep_mask(shape: torch.Size, p: float, generator: torch.Generator, device: torch.device) -> Tensor:
    """Bool mask, each element True with probability 1 - round(p * 65536) / 65536."""
    n = math.prod(shape)
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=device)
    draws.random_(-(1 << 63), None, generator=generator)  # all 64 bits (random_() leaves the sign 0)
    bits = draws.view(torch.int16)[:n].view(shape)  # uniform on [-32768, 32767]
    return bits >= round(p * _LEVELS) - _LEVELS // 2


class Dropout(nn.Dropout):
    def forward(self, x: Tensor) -> Tensor:
        generator = getattr(_local, "generator", None)
        if generator is None or not self.training or self.p == 0.0:
            return F.dropout(x, self.p, self.training)
        dropped = round(self.p * _LEVELS)
        if dropped >= _LEVELS:
            return x * 0.0
        # x * bool keeps only a 1-byte mask for backward
        return x * keep_mask(x.shape, self.p, generator, x.device) * (_LEVELS / (_LEVELS - dropped))
