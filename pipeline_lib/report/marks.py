"""Significance marks a reader can trust: † on the column that was tested, and none where a system
does not translate.

The translation floor: a system whose BLEU (the table's BLEU metric) is below the floor does not
translate, and a paired bootstrap between two such outputs compares noise. Such a system gets no †
and no "better/worse" words; a baseline below the floor takes every mark of its table with it.
"""

from __future__ import annotations

from typing import Any

from pipeline_lib.evaluate.metric_registry import bleu_names, compound_split_metrics, metric_words
from pipeline_lib.report.inputs import Run, read_json
from pipeline_lib.report.labels import model_label

DAGGER = "†"
DEFAULT_FLOOR = 1.0


def paper_entries(entries: dict[str, Any] | None, metric: str) -> dict[str, Any] | None:
    """A table's ``paper`` entries for a compound-split column: a paper's ``tok_bleu`` is its tokenized
    BLEU as its own eval script computed it, so it stands beside the column computed that way
    (an entry's own ``tok_bleu_t2t``/``tok_bleu_wang`` wins)."""
    if not entries or metric not in compound_split_metrics():
        return entries
    return {
        name: {metric: entry["tok_bleu"], **entry} if "tok_bleu" in entry else entry
        for name, entry in entries.items()
    }


def table_metric(table: dict[str, Any]) -> str:
    """The metric a table is tested on: its ``metric`` key, sacreBLEU when unset (as the workflow's
    significance rule computes it: EvaluateRules.significance_metric)."""
    return table.get("metric") or "bleu"


class Floor:
    """The translation floor of one table, on its BLEU metric."""

    def __init__(self, value: float = DEFAULT_FLOOR, metric: str = "bleu") -> None:
        # A chrF/TER table is judged by sacreBLEU: the floor is a BLEU value.
        self.value = value
        self.metric = metric if metric in bleu_names() else "bleu"

    def score(self, run: Run) -> float | None:
        return run.metric(self.metric)

    def below(self, run: Run) -> bool:
        score = self.score(run)
        return not run.diverged and score is not None and score < self.value

    def all_below(self, runs: list[Run]) -> bool:
        """No system of the table translates (a diverged run does not either)."""
        return bool(runs) and all(r.diverged or self.below(r) for r in runs)

    @property
    def words(self) -> str:
        return f"the translation floor of {metric_words(self.metric)} {self.value:.1f}"

    def lead_note(self) -> str:
        return (
            f"**Read dev perplexity here.** No system of this table reaches {self.words}: none translates "
            "yet, so its BLEU differences are noise; BLEU is shown for completeness and no significance is "
            "claimed."
        )


class Significance:
    """vs-baseline results of one significance JSON for one metric (the table's), by system name."""

    def __init__(self, path: str | None, metric: str = "bleu") -> None:
        self.metric = metric
        self.rows: dict[str, dict[str, Any]] = {}
        self.data: dict[str, Any] | None = None
        self.no_marks: str | None = None  # why the table carries no marks at all
        self.floor: Floor | None = None
        self.below: dict[str, str] = {}  # name -> label of a system below the floor
        if path is None:
            return
        self.data = read_json(path)
        block = self.data.get("vs_baseline", {}).get(metric)
        if block:
            for row in block["systems"]:
                self.rows[row["name"]] = row

    def against(self, base: Run, runs: list[Run] | None = None, floor: Floor | None = None) -> Significance:
        """The marks of one table: none against a diverged baseline (its placeholder output is not a
        system) or one below the floor; none for a system below the floor."""
        out = Significance(None, self.metric)
        out.data, out.rows, out.floor = self.data, self.rows, floor
        if base.diverged:
            out.no_marks = f"No significance marks: the baseline {model_label(base)} diverged."
        elif floor is not None and floor.below(base):
            out.no_marks = (
                f"No significance marks: the baseline {model_label(base)} ({metric_words(floor.metric)} "
                f"{floor.score(base):.1f}) is below {floor.words}: the paired bootstrap compares noise."
            )
        if floor is not None:
            out.below = {r.name: model_label(r) for r in runs or [] if floor.below(r)}
        return out

    def mark(self, name: str) -> str:
        if self.no_marks is not None or name in self.below:
            return ""
        row = self.rows.get(name)
        return DAGGER if row is not None and row.get("significant") else ""

    def note(self, runs: list[Run], baseline: str) -> str | None:
        if self.no_marks is not None:
            return self.no_marks
        if self.data is None:
            return None
        alpha = self.data.get("alpha", 0.05)
        parts, untested = [], []
        for run in runs:
            row = self.rows.get(run.name)
            if row is None or run.diverged:
                continue
            if run.name in self.below:
                untested.append(model_label(run))
                continue
            direction = "better" if row.get("better") else "worse"
            sig = "significant" if row.get("significant") else "not significant"
            parts.append(f"{model_label(run)}: p = {row['p_value']:.4f} ({direction}, {sig})")
        text = ""
        if parts:
            text = (
                f"{DAGGER} {metric_words(self.metric)} significantly different from {baseline} (paired "
                f"bootstrap, {self.data.get('n_samples')} resamples, seed {self.data.get('seed')}, "
                f"p < {alpha}). " + "; ".join(parts) + "."
            )
        if untested and self.floor is not None:
            text += (" " if text else "") + (
                f"Not tested against {baseline}: {', '.join(untested)}, below {self.floor.words}: the "
                "paired bootstrap compares noise."
            )
        return text or None
