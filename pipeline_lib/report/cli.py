"""``report``: render results/tables.md, the learning curves and the stability map.

Usage (the workflow's report rules; the specs are written by the ``report_spec`` and ``curves_spec``
rules, pipeline_lib/report/spec_file.py)::

    python -m pipeline_lib report --spec results/report_spec.json --tables results/tables.md
    python -m pipeline_lib report --spec results/report_spec.json --learning-curves results/plots/lc.png
    python -m pipeline_lib report --spec results/plots/learning_curves.spec.json --learning-curves lc.png
    python -m pipeline_lib report --spec results/report_spec.json \\
        --stability-map results/plots/stability_map.png --stability-table results/stability_map.md

The spec (JSON) names, per experiment, its score JSON (``deepnmt-score/1``), ``status.json`` and
``train_log.jsonl``, the ``tables`` section of the workflow config, and the significance JSON per
table; every number in the outputs is read from those files.
"""

from __future__ import annotations

import argparse
import logging

from pipeline_lib.atomic import write_text
from pipeline_lib.errors import ConfigError
from pipeline_lib.report.inputs import read_spec

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--spec", required=True, help="report spec JSON (results/report_spec.json, written by the workflow)"
    )
    p.add_argument("--tables", help="write the markdown tables here")
    p.add_argument("--learning-curves", help="write the train/dev perplexity plot (PNG) here")
    p.add_argument("--stability-map", help="write the stability heatmap (PNG) here")
    p.add_argument("--stability-table", help="write the stability map as markdown here")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not (args.tables or args.learning_curves or args.stability_map or args.stability_table):
        raise ConfigError("nothing to do: give --tables, --learning-curves or --stability-map")
    only_curves = not (args.tables or args.stability_map or args.stability_table)
    spec = read_spec(args.spec, ("experiments",) if only_curves else ("split", "experiments", "tables"))
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
