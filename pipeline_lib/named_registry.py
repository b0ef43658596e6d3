"""What the residual, metric and table-kind registries share: a name -> spec mapping in registration
order, with one way to add, remove and look up an entry, and lazy ``"module:function"`` references so
that reading names and labels imports neither torch nor sacrebleu."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pipeline_lib.errors import ConfigError

Lazy = Callable[..., Any] | str  # a function, or "module:function" imported on first call
Spec = TypeVar("Spec")


def resolve(function: Lazy) -> Callable[..., Any]:
    if isinstance(function, str):
        module, _, name = function.partition(":")
        return getattr(importlib.import_module(module), name)
    return function


class Registry(dict[str, Spec], Generic[Spec]):
    """``kind`` names an entry in errors ("metric", "residual variant"); ``name_of`` gives a spec's key."""

    def __init__(self, kind: str, name_of: Callable[[Spec], str]) -> None:
        super().__init__()
        self.kind, self.name_of = kind, name_of

    def register(self, spec: Spec) -> Spec:
        name = self.name_of(spec)
        if name in self:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self[name] = spec
        return spec

    def unregister(self, name: str) -> None:
        self.pop(name, None)

    def spec(self, name: str) -> Spec:
        try:
            return self[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r} (known: {', '.join(self)})") from None
