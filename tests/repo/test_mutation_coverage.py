"""`make mutate` sees every function of the modules it mutates: mutmut 3.8 leaves a decorated function
out without a word (its arguments run at definition time), staticmethod and classmethod aside. A
``@torch.no_grad()`` on an init function took the stabilizers' whole init out of their score: the body
goes in a ``with torch.no_grad():`` block instead."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[2]
# mutmut/mutation/file_mutation.py, 3.8.1: staticmethod and classmethod are mutated; a property is skipped
# as any decorated function is, and is allowed here as an attribute read (its logic is left unscored).
ALLOWED = {"staticmethod", "classmethod", "property"}
# Decorated functions allowed in a mutated module (their scores would not cover them): none now.
NOT_MUTATED_YET: set[tuple[str, str]] = set()


def mutated_files() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["mutmut"]["only_mutate"]


def decorated(path: Path) -> list[str]:
    """Functions mutmut does not mutate: any decorator but one staticmethod/classmethod (or property)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.decorator_list:
            decorators = [ast.unparse(d) for d in node.decorator_list]
            if not (len(decorators) == 1 and decorators[0] in ALLOWED):
                names.append(node.name)
    return names


def test_no_mutated_function_is_hidden_behind_a_decorator() -> None:
    hidden = {(name, function) for name in mutated_files() for function in decorated(REPO / name)}
    assert hidden == NOT_MUTATED_YET
