"""Reading what the workflow produced: the report spec, score/status/significance JSON, train logs."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline_lib.errors import InputError

SCORE_SCHEMA = "deepnmt-score/1"


def read_json(path: str | os.PathLike[str]) -> Any:
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: not found") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None


def read_spec(
    path: str | os.PathLike[str], keys: tuple[str, ...] = ("split", "experiments", "tables")
) -> dict[str, Any]:
    """``keys``: what the outputs asked for read (the learning curves' own spec has only experiments)."""
    spec = read_json(path)
    for key in keys:
        if key not in spec:
            raise InputError(f"{path}: report spec lacks '{key}' (written by the workflow's report rules)")
    return spec


@dataclass
class Run:
    """One experiment as the tables see it."""

    name: str
    info: dict[str, Any]
    status: dict[str, Any]
    score: dict[str, Any] | None
    parameters: int | None = None
    train_points: list[tuple[int, float]] = field(default_factory=list)  # (update, train perplexity)

    @property
    def diverged(self) -> bool:
        return self.status.get("status") == "diverged" or (self.score or {}).get("status") == "diverged"

    def metric(self, name: str) -> float | None:
        if self.diverged or self.score is None:
            return None
        entry = self.score.get("scores", {}).get(name)
        return None if entry is None else float(entry["score"])

    def signature(self, name: str) -> str | None:
        entry = (self.score or {}).get("scores", {}).get(name)
        return None if entry is None else entry.get("signature")


def load_run(name: str, info: dict[str, Any], need_score: bool = True) -> Run:
    status = read_json(info["status"])
    score = None
    if need_score:
        score = read_json(info["score"])
        if score.get("schema") != SCORE_SCHEMA:
            raise InputError(f"{info['score']}: expected schema {SCORE_SCHEMA}, got {score.get('schema')!r}")
    log = read_train_log(info["train_log"]) if Path(info["train_log"]).is_file() else TrainLog()
    return Run(name, info, status, score, log.parameters, log.train_points)


@dataclass
class TrainLog:
    parameters: int | None = None
    train_ppl: dict[int, float] = field(default_factory=dict)  # epoch -> token-weighted ppl
    valid_ppl: dict[int, float] = field(default_factory=dict)
    diverged_epoch: int | None = None
    # the interval records themselves: (update, perplexity), and the last update of every epoch
    train_points: list[tuple[int, float]] = field(default_factory=list)
    valid_points: list[tuple[int, float]] = field(default_factory=list)
    epoch_ends: dict[int, int] = field(default_factory=dict)  # epoch -> its last logged update
    diverged_update: int | None = None


def read_train_log(path: str | os.PathLike[str]) -> TrainLog:
    """Per-epoch train/valid perplexity from the trainer's JSONL log (Figure 2).

    Train records cover the updates since the previous one; their nll (bits/token) is averaged per
    epoch weighted by the tokens of those updates. A resumed run's log is already truncated by the
    trainer, so later records simply continue it.
    """
    out = TrainLog()
    nll_sum: dict[int, float] = defaultdict(float)
    tok_sum: dict[int, float] = defaultdict(float)
    prev_update = 0
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if lineno == 1:
                    raise InputError(f"{path}:{lineno}: not a JSON line") from None
                continue  # a line cut by a kill; the trainer rewrites the log on resume
            kind = rec.get("kind")
            if kind == "start":
                out.parameters = rec.get("parameters")
                prev_update = 0
            elif kind == "resume":
                prev_update = int(rec.get("update", 0))
            elif kind == "train":
                update = int(rec["update"])
                tokens = float(rec.get("tokens_per_update", 1.0)) * max(update - prev_update, 1)
                prev_update = update
                epoch = int(rec["epoch"])
                out.epoch_ends[epoch] = max(out.epoch_ends.get(epoch, 0), update)
                if math.isfinite(rec.get("nll_loss", math.nan)):
                    nll_sum[epoch] += rec["nll_loss"] * tokens
                    tok_sum[epoch] += tokens
                    out.train_points.append((update, float(2.0 ** min(rec["nll_loss"], 100.0))))
            elif kind == "valid":
                out.valid_ppl[int(rec["epoch"])] = float(rec["ppl"])
                if "update" in rec:
                    out.valid_points.append((int(rec["update"]), float(rec["ppl"])))
            elif kind == "diverged":
                out.diverged_epoch = int(rec.get("epoch", 0))
                out.diverged_update = rec.get("update", prev_update)
    for epoch, tokens in tok_sum.items():
        if tokens > 0:
            out.train_ppl[epoch] = float(2.0 ** min(nll_sum[epoch] / tokens, 100.0))
    return out
