"""``check-config``: validate workflow config files, pointing at the file and line of any problem.

    python -m pipeline_lib check-config config.wmt14_en_fr.yaml [more.yaml ...]

Loads the files as ``snakemake --configfile`` does (in order, later ones merged over earlier ones),
then runs the workflow's own checks: the schema and the cross-references (datasets, widths, recipes,
tables). Snakemake's message for a YAML syntax error in a ``--configfile`` says neither file nor
line; this command gives ``file:line:column`` and shows the line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.config_files import load_mapping, merge, with_location
from pipeline_lib.workflow.plan import Plan
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files", nargs="*", type=Path, default=[Path("config.yaml")], help="config files, in order"
    )
    p.add_argument(
        "--workflow-dir", type=Path, default=Path("."), help="the repository (holds workflow/schemas)"
    )


def check(files: list[Path], workflow_dir: Path) -> Plan:
    """The workflow's plan for the merged files; a ConfigError names ``file:line`` where it can."""
    config: dict = {}
    for path in files:
        merge(config, load_mapping(path))
    try:
        validate_config(config, load_schema(workflow_dir / SCHEMA_FILE))
        return Plan(config)
    except ConfigError as exc:
        raise with_location(exc, files) from None


def run(args: argparse.Namespace) -> int:
    plan = check(args.files, args.workflow_dir)
    names = " + ".join(str(f) for f in args.files)
    print(
        f"{names}: valid ({len(plan.datasets)} datasets, {len(plan.experiments)} experiments, "
        f"results in {plan.results})"
    )
    return 0
