"""Learning curves (Admin paper Figure 2 shape); the stability map is in :mod:`.stability`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from pipeline_lib.report.figures import plt, save_figure
from pipeline_lib.report.inputs import Run, TrainLog, read_json, read_train_log
from pipeline_lib.report.labels import model_label


def learning_curves(spec: dict[str, Any], path: str) -> dict[str, TrainLog]:
    """Train (left) and dev (right) perplexity over updates, one line per experiment of the tables.

    Every interval record of ``train_log.jsonl`` is a point (an update-limited run has as many as
    its log interval gives, not one per epoch); a square marks the end of each epoch, an x where a
    run diverged."""
    logs: dict[str, TrainLog] = {}
    labels: dict[str, str] = {}
    for name, info in spec["experiments"].items():
        log_path = Path(info["train_log"])
        logs[name] = read_train_log(log_path) if log_path.is_file() else TrainLog()
        status = read_json(info["status"])
        labels[name] = model_label(Run(name, info, status, None))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    colors = stable_colors(logs)  # one colour per run in both panels, the same in every rerun
    for ax, attr, title in ((axes[0], "train_points", "Training"), (axes[1], "valid_points", "Development")):
        for name, log in logs.items():
            points = sorted(getattr(log, attr))
            if not points:
                continue
            updates, ppl = zip(*points, strict=True)
            ax.plot(updates, ppl, marker="." if len(points) < 60 else None, ms=3, color=colors[name], lw=1.2)
            ends = [u for u in log.epoch_ends.values() if updates[0] <= u <= updates[-1]]
            ax.plot(
                ends, [_at(points, u) for u in ends], ls="", marker="s", ms=4, mfc="none", color=colors[name]
            )
            if log.diverged_update is not None:
                ax.plot([updates[-1]], [ppl[-1]], marker="x", ms=9, color=colors[name])
        ax.set_yscale("log")
        ax.set_xlabel("update")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("perplexity")
        ax.set_title(f"{title} perplexity")
        ax.grid(alpha=0.3)
    handles = [
        Line2D([], [], color=colors[n], marker=".", ms=3, label=labels[n])
        for n, log in logs.items()
        if log.train_points or log.valid_points
    ]
    if handles:
        axes[1].legend(handles=handles, fontsize="small")
    fig.suptitle("Learning curves (□: end of an epoch, x: diverged)")
    fig.tight_layout()
    save_figure(fig, path)
    return logs


def stable_colors(names: Iterable[str]) -> dict[str, str]:
    """A colour per experiment that follows its name, not its place in the spec: a rerun, a reordered
    config or a table added elsewhere leaves it unchanged. Each name takes the palette slot its hash
    picks, the next free one on a clash (in name order, so clashes resolve the same way every time)."""
    ordered = sorted(set(names))
    palette = plt.get_cmap("tab10" if len(ordered) <= 10 else "tab20").colors
    taken: set[int] = set()
    colors: dict[str, str] = {}
    for name in ordered:
        wanted = int(hashlib.sha256(name.encode()).hexdigest(), 16) % len(palette)
        free = [(wanted + step) % len(palette) for step in range(len(palette))]
        slot = next((i for i in free if i not in taken), wanted)  # more runs than colours: share
        taken.add(slot)
        colors[name] = _hex(palette[slot])
    return colors


def _hex(rgb: tuple[float, ...]) -> str:
    return "#" + "".join(f"{round(c * 255):02x}" for c in rgb[:3])


def _at(points: list[tuple[int, float]], update: int) -> float:
    """The perplexity of the last point at or before ``update``."""
    before = [p for u, p in points if u <= update]
    return before[-1] if before else points[0][1]
