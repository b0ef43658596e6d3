"""A table row that is a mean over training runs (config ``experiments.<name>.seeds``): one row per
group, mean ± sample standard deviation over the runs that converged, as papers report it (Admin
Table 2: mean ± std over five seeds; Wang et al. 2019: the mean of three runs).

A :class:`SeedGroup` reads like a :class:`~pipeline_lib.report.inputs.Run` to the tables: its metric
is the mean over its converged runs (so Δ and the paper column compare the mean), and it counts as
diverged only when every run diverged. A diverged run is counted, never averaged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from pipeline_lib.errors import InputError
from pipeline_lib.report.inputs import Run


@dataclass
class SeedGroup:
    name: str
    label: str
    members: list[Run]

    @property
    def converged(self) -> list[Run]:
        return [r for r in self.members if not r.diverged]

    @property
    def diverged(self) -> bool:
        return not self.converged

    @property
    def info(self) -> dict[str, Any]:
        """The architecture of its runs (they differ only in seed), under the group's label."""
        info = {k: v for k, v in self.members[0].info.items() if k != "seed"}
        return {**info, "label": self.label, "seeds": [r.info.get("seed", 1) for r in self.members]}

    @property
    def parameters(self) -> int | None:
        return self.members[0].parameters

    @property
    def status(self) -> dict[str, Any]:
        """As a run's status.json reads to the tables: diverged only when every run did; the update
        its converged runs stopped at (when they agree) and their mean dev perplexity."""
        runs = self.converged
        if not runs:
            return {"status": "diverged"}
        updates = {r.status.get("update") for r in runs}
        ppl = [p for r in runs for p in [(r.status.get("valid") or {}).get("ppl")] if p is not None]
        return {
            "status": "completed",
            "update": updates.pop() if len(updates) == 1 else None,
            "valid": {"ppl": statistics.fmean(ppl)} if ppl else {},
        }

    def values(self, metric: str) -> list[float]:
        """The metric of every converged run that has it (a diverged run has none)."""
        return [v for r in self.converged for v in [r.metric(metric)] if v is not None]

    def metric(self, name: str) -> float | None:
        values = self.values(name)
        return statistics.fmean(values) if values else None

    def std(self, name: str) -> float | None:
        """Sample standard deviation (n - 1): the runs are a sample of the seeds one could train."""
        values = self.values(name)
        return statistics.stdev(values) if len(values) > 1 else None

    def signature(self, name: str) -> str | None:
        return next((s for r in self.converged for s in [r.signature(name)] if s), None)

    def cell(self, metric: str) -> str:
        """'35.52 ± 0.21 (n=4; 1/5 diverged)': mean ± sample std over the runs that converged."""
        values = self.values(metric)
        if not values:
            return "–"  # a metric no run was scored with
        n_diverged = len(self.members) - len(self.converged)
        diverged = f"; {n_diverged}/{len(self.members)} diverged" if n_diverged else ""
        std = self.std(metric)
        spread = f" ± {std:.2f}" if std is not None else ""
        return f"{statistics.fmean(values):.2f}{spread} (n={len(values)}{diverged})"


Row = Run | SeedGroup  # what a table row reads: one run, or the mean over a seed group's runs


def load_groups(spec: dict[str, Any], runs: dict[str, Run]) -> dict[str, SeedGroup]:
    """The spec's ``groups`` (name -> label and runs) over the loaded runs."""
    groups = {}
    for name, group in spec.get("groups", {}).items():
        missing = [r for r in group["runs"] if r not in runs]
        if missing:
            raise InputError(f"report spec: seed group {name!r} names runs it does not list: {missing}")
        groups[name] = SeedGroup(name, group.get("label", name), [runs[r] for r in group["runs"]])
    return groups


def members(rows: list[Row]) -> list[Run]:
    """The runs behind the rows (a group: each of its runs), for per-run notes and signatures."""
    return [m for r in rows for m in (r.members if isinstance(r, SeedGroup) else [r])]
