"""What a config dataclass field accepts, declared once in its metadata: the dataclass checks its
values against it (:func:`check_fields`) and the workflow's config schema is generated from it
(:func:`json_schema`), as the command-line flags are (pipeline_lib/dataclass_cli.py).

Metadata read here, besides dataclass_cli's ``help`` and ``choices``:

* ``ge`` / ``gt`` / ``le`` / ``lt``: numeric bounds (JSON Schema's minimum, exclusiveMinimum, maximum,
  exclusiveMaximum); for a fixed-length tuple they bound every item;
* ``keywords``: strings a number field also takes (the divergence threshold's ``unigram``);
* ``doc``: the schema's description where the flag's ``help`` is worded for a negated flag.

The type comes from the annotation: bool, int, float, str, ``X | None`` (None allowed in Python, left
out of a config), ``tuple[float, float]``, ``tuple[str, ...]`` (a list of distinct words, each one of
``choices`` when given), and ``float | str`` with ``keywords``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable
from typing import Any

from pipeline_lib.errors import ConfigError

# metadata key -> (JSON Schema keyword, the comparison in words, holds(value, bound))
BOUNDS: dict[str, tuple[str, str, Callable[[float, float], bool]]] = {
    "ge": ("minimum", ">=", lambda v, b: v >= b),
    "gt": ("exclusiveMinimum", ">", lambda v, b: v > b),
    "le": ("maximum", "<=", lambda v, b: v <= b),
    "lt": ("exclusiveMaximum", "<", lambda v, b: v < b),
}
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One field's accepted values, read off its annotation and metadata."""

    name: str
    types: tuple[type, ...]  # without NoneType; (float,) for tuple[float, float]
    length: int | None  # items of a fixed-length tuple
    many: bool  # tuple[str, ...]: any number of distinct items
    bounds: dict[str, float]
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None
    keywords: tuple[str, ...]
    description: str | None

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not accepted (to follow the field's name), or None."""
        if value is None:
            return None
        if self.many:
            return self._list_problem(value)
        if self.choices is not None:
            return (
                None if value in self._choices() else f"={value!r} is not one of {', '.join(self._choices())}"
            )
        if isinstance(value, str) and self.keywords:
            if value in self.keywords:
                return None
            return f" must be a number or {' or '.join(map(repr, self.keywords))}, got {value!r}"
        if not self.bounds:
            return None
        if self.length is not None:
            if (
                isinstance(value, (tuple, list))
                and len(value) == self.length
                and all(map(self._accepts, value))
            ):
                return None
            return f" must be {self.length} {self._kind()}s {self._range()}, got {value!r}"
        if self._accepts(value):
            return None
        return f" must be a{'n' if self._kind() == 'integer' else ''} {self._kind()} {self._range()}, got {value!r}"

    def _list_problem(self, value: Any) -> str | None:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            return f" must be a list of words, got {value!r}"
        if len(set(value)) != len(value):
            return f" lists an item twice: {list(value)!r}"
        if self.choices is not None:
            bad = [v for v in value if v not in self._choices()]
            if bad:
                return f": {bad[0]!r} is not one of {', '.join(self._choices())}"
        return None

    def _choices(self) -> tuple[str, ...]:
        return self.choices() if callable(self.choices) else self.choices

    def _kind(self) -> str:
        return "integer" if int in self.types and float not in self.types else "finite number"

    def _accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self._kind() == "integer" and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        return all(BOUNDS[key][2](value, bound) for key, bound in self.bounds.items())

    def _range(self) -> str:
        lower = {k: v for k, v in self.bounds.items() if k in ("ge", "gt")}
        upper = {k: v for k, v in self.bounds.items() if k in ("le", "lt")}
        if lower and upper:
            (lk, lv), (uk, uv) = next(iter(lower.items())), next(iter(upper.items()))
            return f"in {'[' if lk == 'ge' else '('}{lv:g}, {uv:g}{']' if uk == 'le' else ')'}"
        return " and ".join(f"{BOUNDS[k][1]} {v:g}" for k, v in self.bounds.items())

    def json_schema(self) -> dict[str, Any]:
        """This field as a JSON Schema property of a workflow config."""
        bounds = {BOUNDS[k][0]: v for k, v in self.bounds.items()}
        if self.many:
            item = {"enum": list(self._choices())} if self.choices is not None else {"type": "string"}
            prop = {"type": "array", "items": item, "uniqueItems": True}
        elif self.choices is not None:
            prop: dict[str, Any] = {"enum": list(self._choices())}
        elif self.length is not None:
            item = {"type": _JSON_TYPES[self.types[0]], **bounds}
            prop = {"type": "array", "items": item, "minItems": self.length, "maxItems": self.length}
        elif self.keywords:
            prop = {"oneOf": [{"type": "number", **bounds}, {"enum": list(self.keywords)}]}
        else:
            prop = {"type": _JSON_TYPES[self.types[0]], **bounds}
        if self.description:
            prop["description"] = self.description
        return prop


def _spec(field: dataclasses.Field, annotation: Any) -> FieldSpec:
    meta = field.metadata
    args = typing.get_args(annotation)
    length, many = None, False
    if typing.get_origin(annotation) is tuple and args[-1] is Ellipsis:
        kinds, many = args[:-1], True
        if kinds != (str,):
            raise TypeError(f"{field.name}: a variable-length tuple holds str, got {annotation}")
    elif typing.get_origin(annotation) is tuple:
        kinds, length = tuple(dict.fromkeys(args)), len(args)
    elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = tuple(a for a in args if a is not type(None))
    else:
        kinds = (annotation,)
    unknown = [k for k in kinds if k not in _JSON_TYPES]
    if unknown or (len(kinds) > 1 and set(kinds) != {float, str}):
        raise TypeError(f"{field.name}: no schema for the annotation {annotation}")
    return FieldSpec(
        name=field.name,
        types=tuple(k for k in kinds if k is not str) if meta.get("keywords") else kinds,
        length=length,
        many=many,
        bounds={k: meta[k] for k in BOUNDS if k in meta},
        choices=meta.get("choices"),
        keywords=tuple(meta.get("keywords", ())),
        description=meta.get("doc", meta.get("help")),
    )


_CONSTRAINTS = (*BOUNDS, "choices", "keywords")


@functools.cache
def field_specs(cls: type) -> dict[str, FieldSpec]:
    """The spec of every field that has one, by name (once per class: __post_init__ runs on every
    construction). A field of another type (a Path) has none, unless it declares a constraint."""
    hints = typing.get_type_hints(cls)
    specs = {}
    for f in dataclasses.fields(cls):
        try:
            specs[f.name] = _spec(f, hints[f.name])
        except TypeError:
            if any(key in f.metadata for key in _CONSTRAINTS):
                raise
    return specs


def check_fields(obj: Any, label: Callable[[str], str]) -> None:
    """Raise ConfigError for the first field of ``obj`` outside its declared choices or bounds;
    ``label(name)`` is how the message names the field (e.g. ``train.lr (--lr)``)."""
    for name, spec in field_specs(type(obj)).items():
        problem = spec.problem(getattr(obj, name))
        if problem:
            raise ConfigError(f"{label(name)}{problem}")


def json_schema(cls: type, marker: str, defaults: bool = False) -> dict[str, dict[str, Any]]:
    """JSON Schema properties of the fields of ``cls`` whose metadata sets ``marker``, in field order,
    each under its config key (the marker's value when it is a name). With ``defaults``, a field's
    ``config_default`` (else its default, unless None) is the property's default, which validation
    fills in."""
    specs = field_specs(cls)
    marked = [f for f in dataclasses.fields(cls) if f.metadata.get(marker)]
    untyped = [f.name for f in marked if f.name not in specs]
    if untyped:
        raise TypeError(f"{cls.__name__}: no schema for {', '.join(untyped)} (marked {marker})")
    props = {}
    for f in marked:
        value = f.metadata[marker]
        prop = specs[f.name].json_schema()
        default = f.metadata.get("config_default", f.default)
        if defaults and default is not None and default is not dataclasses.MISSING:
            prop["default"] = list(default) if isinstance(default, tuple) else default
        props[value if isinstance(value, str) else f.name] = prop
    return props
