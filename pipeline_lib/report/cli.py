"""``report``: render results/tables.md, the learning curves and the stability map.

Usage (the workflow's report rules; the spec is written by the ``report_spec`` rule)::

    python -m pipeline_lib report --spec results/report_spec.json --tables results/tables.md
    python -m pipeline_lib report --spec results/report_spec.json --learning-curves results/plots/lc.png
    python -m pipeline_lib report --spec results/report_spec.json \\
        --stability-map results/plots/stability_map.png --stability-table results/stability_map.md

The spec (JSON) names, per experiment, its score JSON (``deepnmt-score/1``), ``status.json`` and
``train_log.jsonl``, the ``tables`` section of the workflow config, and the significance JSON per
table; every number in the outputs is read from those files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
from collections.abc import Iterable

from pipeline_lib.atomic import write_text
from pipeline_lib.errors import ConfigError
from pipeline_lib.report.inputs import read_spec

log = logging.getLogger(__name__)


def configfile_flags(configfiles: Iterable[str | os.PathLike[str]]) -> str:
    """`` --configfiles a.yaml`` for the report_spec rule: the files given on the command line
    (Snakemake's ``workflow.overwrite_configfiles``, absolute paths) relative to the working directory,
    as the user typed them; empty for the default config."""
    files = [os.path.relpath(f) for f in configfiles]
    return (" --configfiles " + " ".join(shlex.quote(f) for f in files)) if files else ""


def add_arguments(p: argparse.ArgumentParser) -> None:
    spec = p.add_mutually_exclusive_group(required=True)
    spec.add_argument("--spec", help="report spec JSON (results/report_spec.json)")
    spec.add_argument("--spec-json", help="the spec itself, as JSON text (the workflow's report_spec rule)")
    p.add_argument("--write-spec", help="write the spec (indented, sorted keys) to this file")
    p.add_argument(
        "--configfiles",
        nargs="+",
        default=[],
        help="with --write-spec: the --configfile(s) the workflow was given, for the tables' rerun hint",
    )
    p.add_argument("--tables", help="write the markdown tables here")
    p.add_argument("--learning-curves", help="write the train/dev perplexity plot (PNG) here")
    p.add_argument("--stability-map", help="write the stability heatmap (PNG) here")
    p.add_argument("--stability-table", help="write the stability map as markdown here")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.write_spec:
        if not args.spec_json:
            raise ConfigError("--write-spec goes with --spec-json")
        try:
            spec = json.loads(args.spec_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--spec-json: not valid JSON ({exc.msg})") from None
        if args.configfiles:
            spec["configfiles"] = args.configfiles
        write_text(args.write_spec, json.dumps(spec, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.write_spec}")
        return 0
    if not (args.tables or args.learning_curves or args.stability_map or args.stability_table):
        raise ConfigError("nothing to do: give --tables, --learning-curves or --stability-map")
    if args.spec is None:
        raise ConfigError("rendering reads the spec from a file: give --spec")
    spec = read_spec(args.spec)
    if args.tables:
        from pipeline_lib.report.tables import render

        text = render(spec)
        write_text(args.tables, text)
        print(text)
    if args.learning_curves:
        from pipeline_lib.report.learning_curves import learning_curves

        learning_curves(spec, args.learning_curves)
        log.info("wrote %s", args.learning_curves)
    if args.stability_map or args.stability_table:
        from pipeline_lib.report.stability import stability_map

        if not args.stability_map:
            raise ConfigError("--stability-table goes with --stability-map")
        if "stability" not in spec:
            raise ConfigError(f"{args.spec}: no stability map configured (config key stability_map)")
        stability_map(spec, args.stability_map, args.stability_table)
        log.info("wrote %s", args.stability_map)
    return 0
