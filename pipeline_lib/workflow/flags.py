"""Config values as argv words: every value of a stage's command line passes through here and is quoted
with :func:`shlex.quote`, so a config value can never become shell code."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

Pairs = Iterable[tuple[str, Any]]


def flag(name: str, value: Any) -> list[str]:
    """``--name value`` as argv words: None/False drop the flag, True is a bare switch, a list repeats values."""
    if value is None or value is False:
        return []
    if value is True:
        return [f"--{name}"]
    if isinstance(value, (list, tuple)):
        return [f"--{name}", *(str(v) for v in value)] if value else []
    return [f"--{name}", str(value)]


def flag_words(pairs: Pairs) -> list[str]:
    return [word for name, value in pairs for word in flag(name, value)]


def flags(pairs: Pairs) -> str:
    return shlex.join(flag_words(pairs))
