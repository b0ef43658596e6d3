"""The paper's number beside ours: a table's ``paper`` mapping (config ``tables.<table>.paper``).

Each entry names its source and gives the paper's score per metric (``tok_bleu``, ``bleu``, ``ter``,
``meteor``, ``chrf``; ``<metric>_std`` the ± the paper prints beside a mean over runs), or ``diverged: true`` where the paper reports a failed run, or
``unreported: <why>`` where the paper has no such row. The table shows the paper's value of its own
metric and ours minus the paper's, and says how many rows agree within the tolerance.
"""

from __future__ import annotations

from typing import Any

from pipeline_lib.evaluate.metric_registry import METRICS, metric_words
from pipeline_lib.report.inputs import Run
from pipeline_lib.report.labels import model_label

DEFAULT_TOLERANCE = 0.5
HEADER = ["Paper", "Δ paper"]


def fmt_paper(value: float) -> str:
    """As the paper prints it (41.29 stays 41.29), with at least one decimal (46.0, not 46)."""
    text = f"{value:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


class PaperColumns:
    """The paper's value and ours minus it, for one table and one metric."""

    def __init__(self, entries: dict[str, dict[str, Any]] | None, metric: str, tolerance: float) -> None:
        self.entries = entries or {}
        self.metric = metric
        self.tolerance = tolerance

    @property
    def active(self) -> bool:
        return bool(self.entries)

    def cells(self, run: Run) -> list[str]:
        entry = self.entries.get(run.name)
        if entry is None or "unreported" in entry:
            return ["–", "–"]
        if entry.get("diverged"):
            return ["diverged", "both diverged" if run.diverged else "–"]
        value = entry.get(self.metric)
        if value is None:
            return ["–", "–"]
        ours = run.metric(self.metric)
        std = entry.get(f"{self.metric}_std")  # a mean over runs, as the paper prints it
        shown = fmt_paper(value) if std is None else f"{fmt_paper(value)} ± {fmt_paper(std)}"
        return [shown, "–" if ours is None else f"{ours - value:+.1f}"]

    def agreement(self, run: Run) -> bool | None:
        """Within the tolerance (a diverged row agrees with a diverged paper row); None: not comparable."""
        entry = self.entries.get(run.name) or {}
        if entry.get("diverged"):
            return run.diverged
        value = entry.get(self.metric)
        if value is None:
            return None
        if run.diverged:
            return False
        ours = run.metric(self.metric)
        return None if ours is None else abs(ours - value) <= self.tolerance + 1e-9

    def notes(self, runs: list[Run]) -> list[str]:
        if not self.active:
            return []
        verdicts = [v for v in (self.agreement(r) for r in runs) if v is not None]
        name = metric_words(self.metric)
        lines = [
            f"Paper: the published {name} of each row; Δ paper = ours − paper. "
            + (
                f"{sum(verdicts)} of {len(verdicts)} compared rows are within ±{self.tolerance:g} {name} of "
                "the paper (a run that diverged agrees with a paper row that diverged)."
                if verdicts
                else "No row can be compared yet."
            )
        ]
        by_source: dict[str, list[str]] = {}
        for run in runs:
            entry = self.entries.get(run.name)
            if entry is None:
                continue
            if "unreported" in entry:
                lines.append(f"Not in the paper: {model_label(run)}: {entry['unreported']}.")
            elif entry.get(self.metric) is None and not entry.get("diverged"):
                given = ", ".join(metric_words(m) for m in entry if m in METRICS)  # not the _std keys
                lines.append(f"{model_label(run)}: the paper gives {given}, not {name}.")
            if entry.get("source"):
                by_source.setdefault(entry["source"], []).append(model_label(run))
            if entry.get("note"):
                lines.append(f"{model_label(run)}: {entry['note']}")
        if by_source:
            lines.append(
                "Sources: " + "; ".join(f"{src} ({', '.join(rows)})" for src, rows in by_source.items()) + "."
            )
        return lines
