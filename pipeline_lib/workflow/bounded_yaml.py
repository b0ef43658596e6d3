"""Bounds on a config before anything walks it: file size, and the size its aliases expand to.

YAML aliases share one object, so loading a "billion laughs" document (anchors nested 9 deep, 9
aliases each) is cheap; what explodes is any pass that treats the shared objects as a tree: schema
validation formatting ``repr(value)`` for each bad item, a deep copy, a JSON dump. A real config is
under a thousand nodes (the largest shipped one, 926), so the limits below are generous for any
honest file and stop a bomb in milliseconds, before validation sees it. Both ``check-config`` and
the workflow (``workflow/rules/common.smk``, through :func:`validate_config`) go through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.errors import ConfigError

MAX_BYTES = 1 << 20  # a config file; the shipped ones are under 16 KB
MAX_NODES = 100_000  # scalars + lists + mappings, counting each alias as the copy it stands for
SHOWN_CHARS = 120  # of a value quoted in an error


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def check_file_size(path: Path, size: int) -> None:
    if size > MAX_BYTES:
        raise ConfigError(
            f"{path}: {size:,} bytes, over the {MAX_BYTES:,}-byte limit for a config file "
            "(a config is a few KB; refused before parsing)"
        )


def _node_sizes(root: yaml.Node, path: Path) -> int:
    """Expanded node count of ``root``; ConfigError at the first node past :data:`MAX_NODES`."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ConfigError(f"{_where(path, node)}: a YAML alias refers to a node that contains it")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_nodes.discard(key)
        if total > MAX_NODES:
            raise ConfigError(
                f"{_where(path, node)}: this value expands to more than {MAX_NODES:,} nodes through "
                "YAML aliases (an alias bomb?); refused before validation"
            )
        sizes[key] = total
        return total

    return size(root)


def _where(path: Path, node: yaml.Node) -> str:
    mark = node.start_mark
    return f"{path}:{mark.line + 1}:{mark.column + 1}"


def safe_load_bounded(text: str, path: Path) -> Any:
    """``yaml.safe_load(text)`` after checking the size and the alias expansion of the document."""
    check_file_size(path, len(text.encode("utf-8")))
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _node_sizes(node, path)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a config") from None
    finally:
        loader.dispose()


def check_expanded_size(value: Any, where: str = "") -> None:
    """The same bound on an already loaded config (shared objects counted once per reference), as
    Snakemake hands the workflow the ``--configfile`` it parsed itself. ConfigError keyed by the
    dotted key of the first value past the limit, so the workflow can point at its file and line."""
    sizes: dict[int, int] = {}
    open_values: set[int] = set()

    def size(item: Any, key: str) -> int:
        if not isinstance(item, (dict, list)):
            return 1
        ident = id(item)
        if ident in sizes:
            return sizes[ident]
        if ident in open_values:
            raise ConfigError(f"config key '{key}': a value that contains itself", key=key)
        open_values.add(ident)
        if isinstance(item, dict):
            total = 1 + sum(1 + size(v, f"{key}.{k}" if key else str(k)) for k, v in item.items())
        else:
            total = 1 + sum(size(v, f"{key}.{i}" if key else str(i)) for i, v in enumerate(item))
        open_values.discard(ident)
        if total > MAX_NODES:
            raise ConfigError(
                f"config key '{key or '<top level>'}': expands to more than {MAX_NODES:,} values "
                "(YAML aliases repeating a value: an alias bomb?); refused before validation",
                key=key or None,
            )
        sizes[ident] = total
        return total

    try:
        size(value, where)
    except RecursionError:
        raise ConfigError("the config is nested too deeply to be one") from None
