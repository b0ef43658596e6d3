"""Dropout that draws from a generator chosen by the caller, per thread.

The trainer gives every micro-batch its own generator, seeded from (seed, update, micro-batch), so
dropout masks do not depend on which thread ran the micro-batch or in what order
(``--cpu-workers``). Without a generator (decoding, tests) this is ``nn.Dropout``.
"""

from __future__ import annotations

import contextlib
import math
import threading

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pipeline_lib.thread_local import thread_local_setting

_local = threading.local()


def dropout_generator(generator: torch.Generator | None) -> contextlib.AbstractContextManager[None]:
    """Dropout in this thread draws from ``generator`` inside the block."""
    return thread_local_setting(_local, "generator", generator)


def current_dropout_generator() -> torch.Generator | None:
    return getattr(_local, "generator", None)


# Keep-masks come from 16 random bits per element, four per 64-bit draw: the Mersenne Twister is
# the cost of CPU dropout, and one draw per element (bernoulli_, rand) takes ~2.6x as long. The drop
# probability is thereby rounded to a multiple of 1/65536, and the scale uses the rounded value.
_LEVELS = 1 << 16


def keep_mask(shape: torch.Size, p: float, generator: torch.Generator, device: torch.device) -> Tensor:
    """uint8 mask of 0/1, each element 1 with probability 1 - round(p * 65536) / 65536.

    uint8, not bool: on a CPU, torch writes a bool comparison and multiplies by a bool tensor in
    scalar loops, several times slower than the same ops on uint8 (bench/HISTORY.md)."""
    n = math.prod(shape)
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=device)
    draws.random_(-(1 << 63), None, generator=generator)  # all 64 bits (random_() leaves the sign 0)
    bits = draws.view(torch.int16)[:n].view(shape)  # uniform on [-32768, 32767]
    mask = torch.empty(shape, dtype=torch.uint8, device=device)
    return torch.ge(bits, round(p * _LEVELS) - _LEVELS // 2, out=mask)


class Dropout(nn.Dropout):
    def forward(self, x: Tensor) -> Tensor:
        generator = current_dropout_generator()
        if generator is None or not self.training or self.p == 0.0:
            return F.dropout(x, self.p, self.training)
        dropped = round(self.p * _LEVELS)
        if dropped >= _LEVELS:
            return x * 0.0
        # x * mask keeps only the 1-byte mask for backward; the scale needs nothing, so in place
        return (x * keep_mask(x.shape, self.p, generator, x.device)).mul_(_LEVELS / (_LEVELS - dropped))
