"""A settings dataclass gives its stage's flags and the workflow config's keys for it
(pipeline_lib/dataclass_cli.py, pipeline_lib/field_spec.py): a config key may name a field otherwise
and have another default than the flag."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline_lib.dataclass_cli import add_dataclass_arguments, config_argv, config_keys, option
from pipeline_lib.field_spec import json_schema


def pair(text: str) -> tuple[str, str]:
    name, _, path = text.partition("=")
    return name, path


@dataclass(frozen=True, kw_only=True)
class Toy:
    inputs: tuple[Path, ...] | None = option(None, "files", type=Path, nargs="+", exclusive="source")
    folder: Path | None = option(None, "a folder", type=Path, exclusive="source")
    systems: tuple[tuple[str, str], ...] = option((), "NAME=FILE", type=pair, nargs="+")
    output: str = option(help="where", aliases=("-o",))
    n_samples: int = option(1000, "resamples", cfg="bootstrap_samples", ge=1)
    alpha: float = option(0.05, "level", cfg=True, gt=0, lt=1)
    tagged: bool = option(True, "do not tag", flag="--no-tag", cfg=True, config_default=False, doc="tag")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_dataclass_arguments(p, Toy)
    return p


def test_flags_aliases_typed_lists_and_an_exclusive_pair():
    args = parser().parse_args(["--folder", "d", "-o", "x", "--systems", "a=1", "b=2", "--no-tag"])
    assert (args.folder, args.inputs, args.output) == (Path("d"), None, "x")
    assert args.systems == [("a", "1"), ("b", "2")] and args.tagged is False
    args = parser().parse_args(["--inputs", "p", "q", "--output", "x"])
    assert args.inputs == [Path("p"), Path("q")] and args.systems == [] and args.tagged is True


@pytest.mark.parametrize("argv", [["-o", "x"], ["--inputs", "p", "--folder", "d", "-o", "x"]])
def test_exactly_one_of_an_exclusive_group(argv: list[str], capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(argv)
    assert "--inputs" in capsys.readouterr().err


def test_config_keys_name_fields_otherwise_and_keep_the_configs_default():
    assert config_keys(Toy, "cfg") == {"bootstrap_samples": "n_samples", "alpha": "alpha", "tagged": "tagged"}
    assert json_schema(Toy, "cfg") == {
        "bootstrap_samples": {"type": "integer", "minimum": 1, "description": "resamples"},
        "alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "description": "level"},
        "tagged": {"type": "boolean", "description": "tag"},
    }
    filled = json_schema(Toy, "cfg", defaults=True)
    assert [filled[k]["default"] for k in ("bootstrap_samples", "alpha", "tagged")] == [1000, 0.05, False]


def test_config_values_become_the_fields_flags_in_field_order():
    words, lists = config_argv(Toy, "cfg", {"tagged": False, "alpha": 0.1, "bootstrap_samples": 9})
    assert words == ["--n-samples", "9", "--alpha", "0.1", "--no-tag"] and lists == []
    assert config_argv(Toy, "cfg", {"tagged": True}) == ([], [])  # the flag's own default: no switch
    with pytest.raises(KeyError, match="n_samples"):
        config_argv(Toy, "cfg", {"n_samples": 9})  # the field's name is not the config's key
