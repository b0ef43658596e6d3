"""The decoding settings behind each row (the spec's ``decoding`` per experiment): a column where
the rows differ, one footnote where they share them."""

from __future__ import annotations

from pipeline_lib.report.inputs import Run

HEADER = "Beam / lenpen"


def settings(run: Run) -> str | None:
    """'beam 4, lenpen 1.0' (sampling: 'sampling, top-k 10'); None where the spec has no decoding."""
    dec = run.info.get("decoding")
    if not dec:
        return None
    if dec.get("sampling"):
        return f"sampling, top-k {dec.get('sampling_topk', '–')}"
    return f"beam {dec.get('beam', '–')}, lenpen {dec.get('lenpen', '–')}"


def cell(run: Run) -> str:
    dec = run.info.get("decoding") or {}
    if dec.get("sampling"):
        return f"sampling (top-k {dec.get('sampling_topk', '–')})"
    return f"{dec.get('beam', '–')} / {dec.get('lenpen', '–')}"


def varies(runs: list[Run]) -> bool:
    """A column is needed: the rows (diverged ones never decoded) were decoded differently."""
    return len({settings(r) for r in runs if not r.diverged and settings(r)}) > 1


def note(runs: list[Run]) -> str | None:
    shared = {settings(r) for r in runs if not r.diverged and settings(r)}
    if len(shared) != 1:
        return None
    return f"Decoding: {shared.pop()} for every row (fairseq's lenpen: log-probability / length^lenpen)."
