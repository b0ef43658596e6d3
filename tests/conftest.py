"""Shared test setup: the helper modules in tests/helpers (train_fixtures, workflow_run, ...) import by
name, from any working directory; tests are grouped for pytest-xdist.

Layout: tests/<subpackage>/ holds the tests of pipeline_lib/<subpackage> (tests/core/ the top-level
modules, tests/repo/ whole-repository checks), tests/e2e/ the end-to-end runs, tests/slurm/ the SLURM
runs, tests/fixtures/ their data. Test modules are imported with ``--import-mode=importlib``
(pyproject.toml), so two folders may hold modules of the same name; helpers live only in tests/helpers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
HELPERS = TESTS / "helpers"
if str(HELPERS) not in sys.path:
    sys.path.insert(0, str(HELPERS))
# A test module that reuses another's fixtures imports it as tests.<folder>.<module>, the name importlib
# mode gives it: appended, so the installed pipeline_lib still comes first.
if str(TESTS.parent) not in sys.path:
    sys.path.append(str(TESTS.parent))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Parallel workers share the cores: OpenMP threads that spin while they wait (libgomp's default)
    # then burn the time the other worker needs. Measured on 2 cores beside one busy process,
    # test_model_stability took 279 s spinning and 116 s passive (82 s alone). Set before torch
    # is imported; the tests' subprocesses inherit it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# `make test` runs the modules in parallel (pytest-xdist, see pytest_xdist_make_scheduler below).
# The end-to-end runs (tests/e2e) and the SLURM tests are the long ones: they start first.
SLURM_DIR = "slurm"
E2E_DIR = "e2e"
# Modules whose tests are independent end-to-end runs sharing no fixture: one work unit per test.
ONE_UNIT_PER_TEST = {"e2e/test_paper_mirror.py"}


def _in_slurm_dir(path: Path) -> bool:
    return path.parent.name == SLURM_DIR


def _start_order(path: Path) -> int:
    if _in_slurm_dir(path):
        return 0
    return 1 if path.parent.name == E2E_DIR else 2


def _one_unit_per_test(path: Path) -> bool:
    return f"{path.parent.name}/{path.name}" in ONE_UNIT_PER_TEST


# `make mutate` runs pytest in mutants/, beside mutmut's record of each test's duration. mutmut passes a
# mutant's tests as a set, in no useful order, and stops at the first failure: the cheapest modules
# first make a killed mutant fail early.
MUTMUT_STATS = "mutmut-stats.json"


def _module_seconds() -> dict[str, float]:
    stats = Path(MUTMUT_STATS)
    if not stats.is_file():
        return {}
    seconds: dict[str, float] = {}
    for nodeid, duration in json.loads(stats.read_text("utf-8")).get("duration_by_test", {}).items():
        module = nodeid.split("::", 1)[0]
        seconds[module] = seconds.get(module, 0.0) + duration
    return seconds


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable: the tests of a module keep their order. Every xdist worker collects the same order.
    module_seconds = _module_seconds()
    items.sort(
        key=lambda item: (
            _start_order(Path(item.path)),
            module_seconds.get(item.nodeid.split("::", 1)[0], 0.0),
        )
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """One work unit per test module, so that module- and session-scoped fixtures (trained models,
    the tiny workflow run) are built once; all of tests/slurm is one unit (there is one local SLURM
    cluster to start); the modules in ONE_UNIT_PER_TEST are split per test. Units start in
    collection order (see pytest_collection_modifyitems).

    Not ``--dist loadgroup``: under pytest 9 it no longer sees the group (xdist 3.8 sets
    ``item._nodeid``, which ``nodeid`` no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = Path(nodeid.split("::", 1)[0])
            if _in_slurm_dir(path):
                return SLURM_DIR
            return nodeid if _one_unit_per_test(path) else path.as_posix()

    config.option.loadscopereorder = False
    return ModuleScheduling(config, log)
