"""The training settings behind each row (the spec's ``recipe`` per experiment: its recipe with the
experiment's ``overrides``): a column naming the settings where the rows differ, so a row trained at
another learning rate is not read as the shared recipe's result."""

from __future__ import annotations

from typing import Any

from pipeline_lib.report.inputs import Run

HEADER = "Differs in"
DEFAULT = "default"  # a key one recipe sets and another leaves to TrainConfig's default


def _recipe(run: Run) -> dict[str, Any]:
    return run.info.get("recipe") or {}


def differing(runs: list[Run]) -> list[str]:
    """Keys whose values are not the same in every row (diverged rows included: how they were
    trained is what a reader looks for)."""
    keys = sorted({k for r in runs for k in _recipe(r)})
    return [k for k in keys if len({repr(_recipe(r).get(k, DEFAULT)) for r in runs}) > 1]


def cell(run: Run, keys: list[str]) -> str:
    recipe = _recipe(run)
    return ", ".join(f"{k} {_value(recipe.get(k, DEFAULT))}" for k in keys)


def _value(v: Any) -> str:
    if isinstance(v, list | tuple):
        return "/".join(str(x) for x in v)
    return str(v)
