"""An update and its statistics on their way from the device to the host, judged when the trainer reads them.

``train --deferred-stats`` reads update k's loss and gradient norm only after it has queued update
k+1's forward and backward, so the host never waits on the GPU inside a step: the copy goes to pinned
memory behind an event, and ``read`` waits for that event alone, which finished long before.
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
    stepped: bool  # False when the step was skipped (fp16 overflow, non-finite values)


@dataclass(frozen=True)
class PendingUpdate:
    """--deferred-stats: an update that has stepped and not been judged yet."""

    update: UpdateInfo
    stats: HostStats

    def read(self) -> JudgedUpdate:
        loss_sum, nll_sum, gnorm = self.stats.read()
        return JudgedUpdate(self.update, loss_sum, nll_sum, gnorm, stepped=True)
