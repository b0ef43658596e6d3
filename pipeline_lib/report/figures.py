"""Headless matplotlib and the one way a report figure reaches disk (an atomic PNG write)."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: cluster nodes have no display
import matplotlib.pyplot as plt  # noqa: E402

from pipeline_lib.atomic import write_bytes  # noqa: E402

__all__ = ["plt", "save_figure"]


def save_figure(fig: Any, path: str) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_bytes(path, buf.getvalue())
