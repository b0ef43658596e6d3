"""Where a training run is: the updates done and the data iterator's (epoch, batch index).

The batch plan is a pure function of (seed, epoch), so this is all a checkpoint needs to continue the
data where it stopped. The loop owns it and moves it; the trainer saves and restores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Position:
    num_updates: int = 0
    epoch: int = 1  # the epoch in progress
    batch_index: int = 0  # batches of the epoch's plan consumed, over all ranks
    # The epoch's batch count; a checkpoint's, when it differs (resumed on another split of the same
    # tokens per update), maps batch_index to the same share of the epoch (loop.resume_position).
    plan_length: int | None = None

    def epoch_reached(self) -> int:
        """The epoch in progress, or the last finished one when sitting at an epoch boundary."""
        return self.epoch - 1 if self.batch_index == 0 else self.epoch

    def iterator_state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "batch_index": self.batch_index, "plan_length": self.plan_length}

    def restore(self, num_updates: int, iterator: dict[str, Any]) -> None:
        self.num_updates = int(num_updates)
        self.epoch = int(iterator["epoch"])
        self.batch_index = int(iterator["batch_index"])
        self.plan_length = iterator.get("plan_length")
