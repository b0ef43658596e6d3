"""Shared test setup: the helper modules beside the tests (train_fixtures, workflow_run,
train_ddp_worker) import by name, from any working directory."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
