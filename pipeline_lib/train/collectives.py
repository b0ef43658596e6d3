"""Which rank this process is, and the few collectives the trainer needs. One process (no initialised
process group) needs none of them: every call then stays on the host."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as torch_dist

from pipeline_lib.train.distributed_env import DistributedEnv


@dataclass(frozen=True)
class Ranks:
    device: torch.device
    distributed: bool
    world: int
    rank: int

    @classmethod
    def of(cls, env: DistributedEnv, device: torch.device) -> Ranks:
        distributed = env.is_distributed and torch_dist.is_available() and torch_dist.is_initialized()
        return cls(device, distributed, env.world_size if distributed else 1, env.rank if distributed else 0)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.distributed:
            torch_dist.all_reduce(tensor)
        return tensor.tolist()

    def barrier(self) -> None:
        if self.distributed:
            torch_dist.barrier()

    def agree(self, ntokens: float, stopping: bool) -> tuple[float, bool]:
        """The update's target tokens over all ranks, and whether any rank got a stop signal. One
        process needs no collective (and no device round trip)."""
        if not self.distributed:
            return ntokens, stopping
        total, votes = self.all_reduce([ntokens, float(stopping)])
        return total, votes > 0
