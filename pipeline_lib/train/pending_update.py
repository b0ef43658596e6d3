"""An update and its statistics on their way from the device to the host, judged when the trainer reads them.

``train --deferred-stats`` reads update k's loss and gradient norm only after it has queued update
k+1's forward and backward, so the host never waits on the GPU inside a step: the copy goes to pinned
memory behind an event, and ``read`` waits for that event alone, which finished long before.

With a loss scaler (``--amp fp16`` / ``fairseq_fp16``) the next update is queued as if update k did not
overflow (its dropout seed and, for fairseq's scaler, its loss scale follow from that); when k turns
out to have overflowed, its step is taken back (step_undo.py) and the next update's forward and backward
run again with the synchronous path's seed and scale: one extra forward/backward per overflow.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class HostStats:
    values: Tensor  # 1-D float64 on the host; filled once ``ready`` has fired
    ready: torch.cuda.Event | None = None

    @classmethod
    def copy_from(cls, stats: Tensor) -> HostStats:
        if stats.device.type != "cuda":
            return cls(stats.detach())
        host = torch.empty(stats.shape, dtype=stats.dtype, pin_memory=True)
        host.copy_(stats.detach(), non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return cls(host, event)

    def read(self) -> list[float]:
        if self.ready is not None:
            self.ready.synchronize()
        return self.values.tolist()


@dataclass(frozen=True)
class UpdateInfo:
    batches: int  # plan entries the update consumed, over all ranks
    sentences: int
    total_tokens: float  # target tokens over all ranks


@dataclass(frozen=True)
class JudgedUpdate:
    update: UpdateInfo
    loss_sum: float  # nats, summed over ranks
    nll_sum: float
    gnorm: float
    # False when the step was skipped or taken back: an fp16 overflow; non-finite values on the
    # synchronous path. With --deferred-stats and no fp16 a non-finite update has stepped: the
    # divergence check ends the run when it reads the statistics (Updater.conclude)
    stepped: bool


@dataclass(frozen=True)
class PendingUpdate:
    """--deferred-stats: an update that has stepped and not been judged yet (``Updater.conclude``
    judges it; with fp16 an overflow found then takes the step back)."""

    update: UpdateInfo
    stats: HostStats  # loss_sum, nll_sum, gnorm[, --amp fp16: found_inf, the scale after its update]
