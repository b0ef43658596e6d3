"""Where in the YAML files a config problem is: ``file:line`` for a syntax error or a config key.

Snakemake merges the config files before the workflow sees them, so a schema error knows only the
dotted key. These helpers find which file (the last one, as later files override earlier ones) and
which line set that key, and turn a YAML syntax error into ``file:line:column``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.bounded_yaml import check_file_size, safe_load_bounded


def load_yaml(path: str | Path) -> Any:
    """Parse one YAML file; a syntax error is a ConfigError naming ``file:line:column``."""
    path = Path(path)
    try:
        check_file_size(path, path.stat().st_size)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        return safe_load_bounded(text, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        began = exc.context_mark
        if began is not None and mark is not None and began.line != mark.line:
            what += f" (the construct began at line {began.line + 1})"
        line = text.splitlines()[mark.line] if mark and mark.line < len(text.splitlines()) else ""
        caret = f"\n    {line}\n    {' ' * mark.column}^" if line else ""
        raise ConfigError(f"{where}: YAML syntax error: {what}{caret}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: YAML syntax error: {exc}") from None


def load_mapping(path: str | Path) -> dict[str, Any]:
    """A config file's top level, which must be a mapping."""
    data = load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: a config file is a mapping of keys, got {type(data).__name__}")
    return data


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Deep merge as Snakemake merges several ``--configfile``s (mappings merge, the rest replaces)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def _find(root: yaml.Node, parts: list[str]) -> tuple[int, yaml.Mark]:
    """(how many leading parts of the key exist under ``root``, where the last of them is written)."""
    node, mark, depth = root, root.start_mark, 0
    for part in parts:
        if not isinstance(node, yaml.MappingNode):
            break
        match = next(
            ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None
        )
        if match is None:
            break
        # the key's own line: a nested mapping's value starts on the line after it
        (key_node, node), depth = match, depth + 1
        mark = key_node.start_mark
    return depth, mark


def locate_key(key: str, files: Sequence[str | Path]) -> str | None:
    """``file:line`` of the dotted config ``key`` in the last file that sets it, else of the deepest
    part of it that some file sets; None when no file mentions it (a schema default)."""
    parts = [p for p in key.split(".") if p] if key and key != "<top level>" else []
    best: tuple[int, str] | None = None
    for path in reversed(list(files)):
        try:
            root = yaml.compose(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if root is None:
            continue
        depth, mark = _find(root, parts)
        if depth == 0 and parts:
            continue
        where = f"{path}:{mark.line + 1}"
        if depth == len(parts):
            return where
        if best is None or depth > best[0]:
            best = (depth, where)
    return best[1] if best else None


def with_location(error: ConfigError, files: Sequence[str | Path]) -> ConfigError:
    """The same error with the ``file:line`` of its key prefixed, when one can be found."""
    where = locate_key(error.key, files) if error.key is not None else None
    return ConfigError(f"{where}: {error}", key=error.key) if where else error
