"""Placeholders for the outputs downstream of a diverged training run.

A diverged run (``status.json`` written by ``train`` with ``"status": "diverged"``) has no model to
average or decode, but the workflow must still finish so that the tables can say "diverged". The
``average``, ``translate`` and ``score`` stages take ``--skip-if-diverged STATUS``: when the run
diverged, :func:`skip_diverged` writes their outputs as placeholders marked diverged (a JSON marker
instead of a checkpoint, empty hypotheses with the split's line count, a score JSON without scores)
and the stage exits 0 without running.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from pipeline_lib.atomic import write_text
from pipeline_lib.errors import InputError

PLACEHOLDER_FORMAT = "deepnmt-placeholder/1"
SCORE_SCHEMA = "deepnmt-score/1"


def read_status(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        status = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: training status not found (run `python -m pipeline_lib train`)") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(status, dict) or "status" not in status:
        raise InputError(f"{p}:1: expected an object with a 'status' field")
    return status


def is_diverged(path: str | os.PathLike[str]) -> bool:
    return read_status(path).get("status") == "diverged"


def _marker(status: dict[str, Any], status_path: str | os.PathLike[str]) -> dict[str, Any]:
    return {
        "status": "diverged",
        "reason": status.get("reason"),
        "update": status.get("update"),
        "epoch": status.get("epoch"),
        "training_status": str(status_path),
    }


def skip_diverged(
    status_path: str | os.PathLike[str],
    *,
    checkpoint: str | os.PathLike[str] | None = None,
    text: list[str] | None = None,
    lines: int = 0,
    score: str | os.PathLike[str] | None = None,
    system: str | None = None,
) -> bool:
    """Write diverged placeholders and return True if the run diverged; else do nothing, return False."""
    status = read_status(status_path)
    if status.get("status") != "diverged":
        return False
    marker = _marker(status, status_path)
    written = []
    if checkpoint is not None:
        write_text(checkpoint, json.dumps({"format": PLACEHOLDER_FORMAT, **marker}, indent=2) + "\n")
        written.append(str(checkpoint))
    for path in text or []:
        write_text(path, "\n" * lines)  # one empty hypothesis per source sentence
        written.append(str(path))
    if score is not None:
        record = {"schema": SCORE_SCHEMA, "system": system, **marker, "scores": {}}
        write_text(score, json.dumps(record, indent=2) + "\n")
        written.append(str(score))
    print(
        f"training diverged at update {status.get('update')} ({status.get('reason')}): "
        f"wrote placeholders {', '.join(written)}"
    )
    return True


def add_skip_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--skip-if-diverged",
        metavar="STATUS",
        default=None,
        help="training status.json: if that run diverged, write placeholder outputs and exit 0",
    )
