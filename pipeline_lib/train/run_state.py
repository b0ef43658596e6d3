"""A training run's state outside the model: its outcome, the stop signals, and the RNG.

Reproducibility: before every update the torch RNG (dropout) is re-seeded from (seed, update, rank),
so resuming needs no RNG state; the states are stored in checkpoints too, for completeness.
"""

from __future__ import annotations

import random
import signal
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

EXIT_PREEMPTED = 75  # EX_TEMPFAIL: "try again"; SLURM --requeue / Snakemake retries re-run the command


@dataclass
class Outcome:
    status: str  # completed | diverged | preempted
    update: int
    epoch: int
    reason: str | None = None
    criterion: str | None = None  # which divergence criterion fired (train/divergence.py)

    @property
    def exit_code(self) -> int:
        return EXIT_PREEMPTED if self.status == "preempted" else 0


class StopSignal:
    """SIGTERM / SIGUSR1 / SIGINT (Ctrl-C) set a flag; the loop checks it between updates (all ranks
    agree on it), saves and exits 75. A second Ctrl-C stops at once, without saving."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT and self.received == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signum
        hint = " (Ctrl-C again to stop without saving)" if signum == signal.SIGINT else ""
        print(
            f"received {signal.Signals(signum).name}: saving after the current update{hint}", file=sys.stderr
        )

    def __enter__(self) -> StopSignal:
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def update_seed(seed: int, num_updates: int, rank: int) -> int:
    return ((seed * 1_000_003 + num_updates) * 1_009 + rank) % (2**63)


def rng_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), pos, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])
