"""Progress for a log file: one plain line at the session's first update, then at most one every
``interval_s`` seconds (``--progress lines``). A tqdm bar redraws with carriage returns, which a SLURM
or Snakemake log keeps as one ever-growing line; these lines read like fairseq's ``--log-format simple``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

LN2 = math.log(2.0)


def resolve_mode(mode: str, isatty: bool) -> str:
    """``auto``: a tqdm bar on a terminal, lines anywhere else (a file, a pipe)."""
    if mode == "auto":
        return "tqdm" if isatty else "lines"
    return mode


@dataclass(frozen=True)
class Planned:
    """The update a run is expected to stop at; ``estimate`` when it comes from the epochs left
    (each epoch's batch plan differs slightly), not from --max-update."""

    updates: int
    estimate: bool


def planned_updates(
    num_updates: int,
    batch_index: int,
    plan_length: int,
    per_update: int,
    epoch: int,
    max_epoch: int,
    max_update: int,
) -> Planned:
    """Where the run will stop, from the position in this epoch's plan of ``plan_length`` batches."""
    by_update = max_update if max_update > 0 else None
    by_epoch = None
    if max_epoch > 0:
        this_epoch = math.ceil(max(plan_length - batch_index, 0) / per_update)
        later = max(max_epoch - epoch, 0) * math.ceil(plan_length / per_update)
        by_epoch = num_updates + this_epoch + later
    if by_epoch is None or (by_update is not None and by_update <= by_epoch):
        assert by_update is not None  # TrainConfig requires --max-epoch or --max-update
        return Planned(by_update, estimate=False)
    return Planned(by_epoch, estimate=epoch < max_epoch)


class Tee:
    """A text stream writing to several others; one that fails (a closed descriptor) is dropped."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = list(streams)

    def write(self, text: str) -> int:
        for stream in list(self.streams):
            try:
                stream.write(text)
            except OSError:
                self.streams.remove(stream)
        return len(text)

    def flush(self) -> None:
        for stream in list(self.streams):
            try:
                stream.flush()
            except OSError:
                self.streams.remove(stream)


def open_console(fd: int) -> TextIO | None:
    """The extra stream of ``--progress-fd`` (None when 0 or not open in this process)."""
    if fd <= 0:
        return None
    try:
        os.fstat(fd)
    except OSError:
        return None
    return open(fd, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives with the run


def clock_text(seconds: float) -> str:
    """H:MM:SS (hours unbounded)."""
    seconds = max(int(round(seconds)), 0)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressLines:
    """Averages over the updates since the last line; elapsed time and the ETA over this session
    (since the process started or resumed), so a resumed run's rate is its own."""

    def __init__(
        self,
        interval_s: float,
        first_update: int,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self.first_update = first_update  # updates done before this session
        self.stream = stream
        self.clock = clock
        self.start = clock()
        self.last_line: float | None = None
        self.planned: Planned | None = None
        self._reset_window(self.start)

    def _reset_window(self, now: float) -> None:
        self.window_start = now
        self.loss = self.nll = self.tokens = self.gnorm = 0.0
        self.updates = 0

    def step(
        self, update: int, epoch: int, lr: float, loss: float, nll: float, tokens: float, gnorm: float
    ) -> str | None:
        """Count one update (``loss``/``nll``: its sums in nats over ``tokens`` target tokens); returns
        the line, written to the stream, when one is due."""
        self.loss += loss
        self.nll += nll
        self.tokens += tokens
        self.gnorm += gnorm
        self.updates += 1
        now = self.clock()
        if self.last_line is not None and now - self.last_line < self.interval_s:
            return None
        line = self._line(update, epoch, lr, now)
        self.last_line = now
        self._reset_window(now)
        print(line, file=self.stream or sys.stderr, flush=True)
        return line

    def _line(self, update: int, epoch: int, lr: float, now: float) -> str:
        tokens = max(self.tokens, 1.0)
        loss_bits, nll_bits = self.loss / tokens / LN2, self.nll / tokens / LN2
        elapsed = now - self.start
        done = update - self.first_update
        position = f"update {update}"
        eta = "?"
        if self.planned is not None:
            total = self.planned.updates
            mark = "~" if self.planned.estimate else ""
            position += f"/{mark}{total} ({100.0 * update / max(total, 1):.1f}%)"
            if done > 0:
                eta = clock_text(elapsed / done * max(total - update, 0))
        window = max(now - self.window_start, 1e-9)
        return (
            f"progress: {position} | epoch {epoch} | loss {loss_bits:.3f} | nll {nll_bits:.3f} bits "
            f"(ppl {2.0 ** min(nll_bits, 100.0):.2f}) | lr {lr:.3e} | gnorm {self.gnorm / self.updates:.3f} | "
            f"{self.tokens / window:.0f} tok/s | elapsed {clock_text(elapsed)} | eta {eta}"
        )
