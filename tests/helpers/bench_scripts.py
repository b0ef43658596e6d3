"""Load a bench/ script as a module, for tests of its functions (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench_script(name: str) -> ModuleType:
    """bench/<name>.py, run as a module under that name. bench/ goes on sys.path first: the scripts import
    their neighbours (compare) by name."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
