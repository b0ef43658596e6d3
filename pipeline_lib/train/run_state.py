"""A training run's state outside the model: its outcome and the stop signals.

Reproducibility: before every update the torch RNG (dropout) is re-seeded from (seed, update, rank),
so resuming needs no RNG state and checkpoints store none (tests/train/test_resume_rng.py).
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from typing import Any

EXIT_PREEMPTED = 75  # EX_TEMPFAIL: "try again"; SLURM --requeue / Snakemake retries re-run the command


@dataclass
class Outcome:
    status: str  # completed | diverged | preempted
    update: int
    epoch: int
    reason: str | None = None
    criterion: str | None = None  # which divergence criterion fired (pipeline_lib/divergence/rule.py)

    @property
    def exit_code(self) -> int:
        return EXIT_PREEMPTED if self.status == "preempted" else 0


class StopSignal:
    """SIGTERM / SIGUSR1 / SIGINT (Ctrl-C) set a flag; the loop checks it between updates (all ranks
    agree on it), saves and exits 75. A second Ctrl-C stops at once, without saving; a SIGTERM in
    between (Snakemake relays one to its jobs after the terminal's Ctrl-C reached them both) does not
    count as one."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._interrupted = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT:
            if self._interrupted:
                raise KeyboardInterrupt
            self._interrupted = True
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
