"""fairseq's ``inverse_sqrt`` and ``fixed`` learning-rate schedules, and Transformer-Clinic's ``linear``.

Linear warm-up from ``warmup_init_lr`` to ``lr`` over ``warmup_updates`` updates, then
``lr * sqrt(warmup_updates / num_updates)`` (``inverse_sqrt``; with no warm-up, ``lr / sqrt(n)``),
``lr`` (``fixed``), or ``lr * (1 - (n - warmup_updates) / (max_update - warmup_updates))`` (``linear``:
the peak decays to 0 at ``max_update``; the Admin paper's Figure 10 runs, TC
``radam_fairseq/linear_schedule.py`` lines 72-77, with its ``min_lr`` taken as 0, see ``lr_at``).
``lr_at(n)`` is the rate used for update n + 1 (so the very first update uses ``warmup_init_lr``),
exactly as fairseq's ``step_update(n)``. The schedule is a pure function of the update count, so its
state is just that count.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer

from pipeline_lib.train.config import LR_SCHEDULERS


class LrSchedule:
    def __init__(
        self,
        optimizer: Optimizer,
        lr: float,
        warmup_updates: int,
        warmup_init_lr: float,
        decay: str = "inverse_sqrt",
        max_update: int = 0,
    ) -> None:
        if decay not in LR_SCHEDULERS:
            raise ValueError(f"unknown lr schedule {decay!r}")
        if decay == "linear" and max_update <= warmup_updates:
            raise ValueError(
                f"the linear lr schedule decays to 0 at max_update: it needs max_update > warmup_updates, "
                f"got {max_update} <= {warmup_updates}"
            )
        self.decay = decay
        self.optimizer = optimizer
        self.lr = lr
        self.warmup_updates = warmup_updates
        self.warmup_init_lr = warmup_init_lr
        self.max_update = max_update
        self.num_updates = 0
        self.step_update(0)

    def lr_at(self, num_updates: int) -> float:
        if self.warmup_updates > 0 and num_updates < self.warmup_updates:
            return self.warmup_init_lr + num_updates * (self.lr - self.warmup_init_lr) / self.warmup_updates
        if self.decay == "fixed":
            return self.lr
        if self.decay == "linear":
            # TC's scheduler ends at fairseq's --min-lr, whose default there is -1 (TC
            # fairseq/fairseq/options.py:367): typed as the No-Warmup recipe is, the rate would cross 0
            # within ~30 updates and turn negative. Its evident intent, and fairseq's polynomial_decay
            # with power 1 and end 0, is a decay to 0; never below it.
            left = 1.0 - (num_updates - self.warmup_updates) / (self.max_update - self.warmup_updates)
            return self.lr * max(left, 0.0)
        if self.warmup_updates == 0:
            return self.lr / math.sqrt(max(num_updates, 1))
        return self.lr * math.sqrt(self.warmup_updates / num_updates)

    def step_update(self, num_updates: int) -> float:
        self.num_updates = num_updates
        value = self.lr_at(num_updates)
        for group in self.optimizer.param_groups:
            group["lr"] = value
        return value

    def get_lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def state_dict(self) -> dict:
        return {
            "num_updates": self.num_updates,
            "lr": self.lr,
            "warmup_updates": self.warmup_updates,
            "warmup_init_lr": self.warmup_init_lr,
        }

    def load_state_dict(self, state: dict) -> None:
        # The configured lr/warm-up win (a resumed run may change them); only the position is restored.
        self.step_update(int(state["num_updates"]))
