"""argparse flags derived from a config dataclass, so a setting is declared once (fairseq's
``gen_parser_from_dataclass`` pattern).

Each field becomes ``--field-name``. Its ``metadata`` may give ``help``, ``choices``, ``group`` (the
argparse group title), ``type`` (a parser for the command-line text), ``cli_default`` (a callable
giving a default that depends on the machine), ``required``, ``flag`` (another flag name),
``aliases`` (more option strings, ``-o``), ``exclusive`` (the fields sharing this name form a
required mutually exclusive group) and ``nargs`` (for a ``tuple[str, ...]`` field, a list of
words, "*" by default: an empty list is a value); ``choices`` may be a callable (a registry read when
the parser is built), and ``cli: False`` leaves a field out. A field without a default is required; a
bool field is a switch (``store_false`` when it defaults to True).

A workflow config sets a field through a block marked with a metadata key (``recipe=True``): the
config key is the field's name, or the marker's value where the config names it otherwise
(``n_samples`` marked ``evaluation="bootstrap_samples"``), and ``config_default`` is the default the
config gives where it differs from the flag's (a config that leaves a key out gets that value).
The same metadata, with its bounds, also checks the dataclass's values and generates the workflow
schema's hyperparameter keys (pipeline_lib/field_spec.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any


def option(default: Any = dataclasses.MISSING, help: str | None = None, **meta: Any) -> Any:
    """A settings field with its flag's help and ``meta`` (see the module docstring, and
    pipeline_lib/field_spec.py for bounds; a stage marks the fields a workflow config may set)."""
    return dataclasses.field(default=default, metadata={"help": help, **meta})


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _is_word_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is tuple and typing.get_args(annotation) == (str, ...)


def _parse_type(annotation: Any) -> Any:
    """int/float/str for a plain or optional annotation (str for each word of a word list); None when
    the field needs its own parser."""
    if annotation in (int, float, str):
        return annotation
    if _is_word_list(annotation):
        return str
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1 and args[0] in (int, float, str):
        return args[0]
    return None


def cli_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)]


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls: type, groups: dict[str, Any] | None = None
) -> None:
    """One flag per field; ``groups`` maps group titles to argument groups the caller made already."""
    hints = typing.get_type_hints(cls)
    groups = dict(groups or {})
    for field in cli_fields(cls):
        meta = field.metadata
        title = meta.get("group")
        target = parser
        if title is not None:
            if title not in groups:
                groups[title] = parser.add_argument_group(title)
            target = groups[title]
        if "exclusive" in meta:  # one of these fields, and only one, is given
            key = f"exclusive: {meta['exclusive']}"
            if key not in groups:
                groups[key] = target.add_mutually_exclusive_group(required=True)
            target = groups[key]
        kwargs: dict[str, Any] = {"help": meta.get("help")}
        has_default = field.default is not dataclasses.MISSING
        if "cli_default" in meta:
            kwargs["default"] = meta["cli_default"]()
        elif has_default:
            kwargs["default"] = field.default
        flags = [meta.get("flag", flag_name(field.name)), *meta.get("aliases", ())]
        if hints[field.name] is bool:
            action = "store_false" if field.default is True else "store_true"
            target.add_argument(*flags, dest=field.name, action=action, **kwargs)
            continue
        if _is_word_list(hints[field.name]):
            kwargs["nargs"] = meta.get("nargs", "*")
            kwargs["default"] = list(kwargs["default"]) if "default" in kwargs else None
        elif "nargs" in meta:  # a list of parsed values (NAME=FILE pairs)
            kwargs["nargs"] = meta["nargs"]
            kwargs["default"] = list(kwargs["default"]) if kwargs.get("default") is not None else None
        parse = meta.get("type") or _parse_type(hints[field.name])
        if parse is None:
            raise TypeError(
                f"{cls.__name__}.{field.name}: give metadata['type'] to parse {hints[field.name]}"
            )
        kwargs["type"] = parse
        if "choices" in meta:
            choices = meta["choices"]
            kwargs["choices"] = choices() if callable(choices) else choices
        kwargs["required"] = meta.get("required", not has_default and "cli_default" not in meta)
        target.add_argument(*flags, dest=field.name, **kwargs)


def dataclass_from_args(cls: type, args: argparse.Namespace, **extra: Any) -> Any:
    """``cls`` from the parsed flags; a flag left at None keeps the field's default; ``extra`` adds
    the fields that are not flags."""
    given = {f.name: _frozen(getattr(args, f.name)) for f in cli_fields(cls)}
    return cls(**{k: v for k, v in given.items() if v is not None or _accepts_none(cls, k)}, **extra)


def _frozen(value: Any) -> Any:
    """argparse's lists as the tuples a frozen dataclass holds."""
    return tuple(value) if isinstance(value, list) else value


def _accepts_none(cls: type, name: str) -> bool:
    return type(None) in typing.get_args(typing.get_type_hints(cls)[name])


def marked_fields(cls: type, marker: str) -> tuple[str, ...]:
    """The fields of ``cls`` that a workflow config block marked ``marker`` may set."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get(marker))


def config_key(field: dataclasses.Field, marker: str) -> str:
    """The key a config block marked ``marker`` sets ``field`` with: the marker's value, or the name."""
    value = field.metadata[marker]
    return value if isinstance(value, str) else field.name


def config_keys(cls: type, marker: str) -> dict[str, str]:
    """config key -> field name, for the fields of ``cls`` marked ``marker``, in field order."""
    return {config_key(f, marker): f.name for f in dataclasses.fields(cls) if f.metadata.get(marker)}


def config_argv(cls: type, marker: str, values: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The flags that give ``cls`` the ``values`` (by config key) a workflow config sets for its
    fields marked ``marker``, in field order; what the config leaves out is left out. A switch appears
    only when the value differs from the field's default (``--dedup``; ``--no-normalize`` for False).
    Returns (the other flags, the word lists): a caller puts the lists last, since such a flag takes
    every word up to the next flag; an empty list stays (it is a value: "none")."""
    keys = config_keys(cls, marker)
    unknown = set(values) - set(keys)
    if unknown:
        raise KeyError(f"{cls.__name__} has no {marker} field {', '.join(sorted(unknown))}")
    by_field = {keys[key]: value for key, value in values.items()}
    hints = typing.get_type_hints(cls)
    words: list[str] = []
    lists: list[str] = []
    for field in dataclasses.fields(cls):
        if field.name not in by_field or by_field[field.name] is None:
            continue
        value, flag = by_field[field.name], field.metadata.get("flag", flag_name(field.name))
        if hints[field.name] is bool:
            words += [flag] if value != field.default else []
        elif _is_word_list(hints[field.name]):
            lists += [flag, *map(str, value)]
        else:
            words += [flag, str(value)]
    return words, lists
