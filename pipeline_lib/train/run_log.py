"""What a run writes beside its checkpoints: the JSONL log (one record per log interval, validation,
start/resume/diverged/preempted) and ``status.json`` (completed | diverged | preempted)."""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any

import torch

from pipeline_lib.atomic import write_text
from pipeline_lib.train.run_state import Outcome

STATUS_FILE = "status.json"
LOG_FILE = "train_log.jsonl"


def peak_memory_mb(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "peak_rss"


class JsonlLog:
    """Append-only JSONL log (rank 0); one object per line, flushed at once so a crash loses nothing."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled
        self._handle = open(path, "a", encoding="utf-8") if enabled else None  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        if self._handle is not None:
            self._handle.write(json.dumps(record, allow_nan=True) + "\n")
            self._handle.flush()

    def truncate_after(self, num_updates: int) -> None:
        """On resume, drop records of updates after the checkpoint (they will be redone)."""
        if self._handle is None or not self.path.exists():
            return
        self._handle.close()
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a SIGKILL
            if record.get("update", 0) <= num_updates:
                kept.append(line)
        write_text(self.path, "".join(k + "\n" for k in kept))
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def records(self, up_to: int) -> list[dict[str, Any]]:
        """The records of updates up to ``up_to``, read by every rank (rank 0 may be truncating: the
        filter makes the result the same either way)."""
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("update", 0) <= up_to:
                found.append(record)
        return found

    def reset(self) -> None:
        """A fresh start: records of an earlier attempt that left no checkpoint are dropped."""
        if self._handle is None:
            return
        self._handle.close()
        self._handle = open(self.path, "w", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def write_status(save_dir: Path, outcome: Outcome, extra: dict[str, Any]) -> None:
    record = {
        "status": outcome.status,
        "update": outcome.update,
        "epoch": outcome.epoch,
        "reason": outcome.reason,
        "criterion": outcome.criterion,
    }
    record.update(extra)
    write_text(save_dir / STATUS_FILE, json.dumps(record, indent=2) + "\n")


def read_status(save_dir: Path) -> dict[str, Any] | None:
    path = save_dir / STATUS_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None


class Meter:
    """Sums of one log interval."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.loss = self.nll = self.tokens = self.gnorm = 0.0
        self.updates = self.sentences = 0
        self.skipped = 0  # fp16 overflows: updates attempted and skipped

    def add(self, loss: float, nll: float, tokens: float, gnorm: float, sentences: int) -> None:
        self.loss += loss
        self.nll += nll
        self.tokens += tokens
        self.gnorm += gnorm
        self.updates += 1
        self.sentences += sentences
