"""Shared test setup: the helper modules beside the tests (train_fixtures, workflow_run,
train_ddp_worker) import by name, from any working directory."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def _starts_late(item) -> bool:
    return item.get_closest_marker("slow") is None and "slurm" not in item.path.parts


def pytest_collection_modifyitems(config, items):
    # The long end-to-end and SLURM runs first: under pytest-xdist they then start at once on
    # different workers, instead of one of them starting last and running alone at the end.
    items.sort(key=_starts_late)
