"""``--decoding NAME``: decode by hand exactly as the workflow's translate jobs do.

A workflow config's ``decoding`` entries hold the search settings (beam, lenpen, the length limit,
sampling) and the batch size that its translate jobs pass as flags. ``translate`` and ``export``
take ``--decoding NAME --configfile FILE...``: NAME is an entry, or an experiment (then its entry).
Every search flag not given on the command line comes from that entry, and only what the entry
leaves unset falls back to the flag's own default (fairseq's: beam 5, length 0*src+200), so a
hand-run translation of raw text matches the workflow's hypotheses.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline_lib.decode.search_config import SearchConfig
from pipeline_lib.errors import ConfigError

# translate's own flags that a decoding entry may also set (the schema's non-generated keys)
RUNTIME_KEYS = ("max_tokens", "seed")
SEARCH_KEYS = tuple(f.name for f in dataclasses.fields(SearchConfig) if f.metadata.get("decoding"))
_FALLBACK = "_decoding_fallback"
# The checkout this package runs from (an editable install): the workflow schema lives there.
REPO_ROOT = Path(__file__).resolve().parents[2]


def add_decoding_arguments(parser: argparse.ArgumentParser, keys: Sequence[str]) -> None:
    """``--decoding``/``--configfile``; ``keys`` (flags already added) become "unset" (None) until
    :func:`apply_decoding` fills them from the entry or from their own defaults."""
    group = parser.add_argument_group("the workflow's decoding")
    group.add_argument(
        "--decoding",
        metavar="NAME",
        default=None,
        help="take every search flag not given here from the config's decoding entry NAME, or from "
        "experiment NAME's decoding entry, as the workflow's translate jobs do",
    )
    group.add_argument(
        "--configfile",
        nargs="+",
        default=["config.yaml"],
        metavar="FILE",
        help="with --decoding: the workflow config file(s), as given to snakemake (default: config.yaml)",
    )
    fallback = {key: parser.get_default(key) for key in keys}
    parser.set_defaults(**{key: None for key in keys}, **{_FALLBACK: fallback})


def apply_decoding(args: argparse.Namespace) -> str | None:
    """Fill the unset search flags of ``args`` in place; returns the entry's name, if one was used.
    An entry key the command has no flag for is refused unless it is a runtime key it can ignore."""
    fallback: dict[str, Any] = getattr(args, _FALLBACK)
    entry_name, entry = (
        (None, {}) if args.decoding is None else decoding_entry(args.decoding, args.configfile)
    )
    unknown = [k for k in entry if k not in fallback and k not in RUNTIME_KEYS]
    if unknown:
        raise ConfigError(
            f"--decoding {args.decoding}: decoding.{entry_name} sets {', '.join(unknown)}, which this "
            f"command does not take (it takes {', '.join(fallback)})"
        )
    for key, default in fallback.items():
        if getattr(args, key) is None:
            setattr(args, key, entry.get(key, default))
    return entry_name


def decoding_entry(name: str, configfiles: Sequence[str | Path]) -> tuple[str, dict[str, Any]]:
    """(entry name, entry) for a decoding entry or an experiment of the merged, validated config.
    The one stage module that reads the workflow's config: imported only when --decoding is given."""
    from pipeline_lib.workflow.cli_check_config import check
    from pipeline_lib.workflow.schema import SCHEMA_FILE

    if not (REPO_ROOT / SCHEMA_FILE).is_file():
        raise ConfigError(
            f"--decoding needs the workflow schema {REPO_ROOT / SCHEMA_FILE} (pipeline_lib installed "
            "from a checkout with pip install -e)"
        )
    files = [Path(f) for f in configfiles]
    plan = check(files, REPO_ROOT)
    entries: dict[str, dict[str, Any]] = plan.config["decoding"]
    if name in entries and name in plan.experiments and plan.decoding_of(name) != name:
        raise ConfigError(
            f"--decoding {name}: both a decoding entry and an experiment (whose entry is "
            f"{plan.decoding_of(name)}) in {' + '.join(map(str, files))}: rename one"
        )
    if name in entries:
        return name, dict(entries[name])
    if name in plan.experiments:
        key = plan.decoding_of(name)
        return key, dict(entries[key])
    raise ConfigError(
        f"--decoding {name}: neither a decoding entry ({', '.join(entries)}) nor an experiment of "
        f"{' + '.join(map(str, files))}"
    )
