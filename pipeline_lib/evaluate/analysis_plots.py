"""Grouped bar charts (one bar per system in each bucket) for the Figure-3 analyses."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # headless: cluster nodes have no display
import matplotlib.pyplot as plt  # noqa: E402

from pipeline_lib.atomic import write_bytes  # noqa: E402


def grouped_bars(
    path: str,
    buckets: Sequence[str],
    values: Mapping[str, Sequence[float | None]],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
) -> None:
    n_sys = max(len(values), 1)
    width = 0.8 / n_sys
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(buckets) + 2), 4.0), dpi=120)
    try:
        for k, (name, ys) in enumerate(values.items()):
            xs = [i - 0.4 + width * (k + 0.5) for i in range(len(buckets))]
            # an empty bucket (None) is drawn as a missing bar, not as a zero score
            ax.bar(xs, [float("nan") if y is None else y for y in ys], width=width, label=name)
        ax.set_xticks(range(len(buckets)))
        ax.set_xticklabels(buckets)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize="small")
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    write_bytes(path, buf.getvalue())
