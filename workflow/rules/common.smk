# Config validation, the resolved plan, and the resource functions the rules share. The logic lives in
# pipeline_lib/workflow/ (plain Python, unit-tested): each rule file has its partner module in
# pipeline_lib/workflow/rules/ (input functions, command lines, logs); this file only wires them in.
import sys
from pathlib import Path

from pipeline_lib.errors import ConfigError
from pipeline_lib.slurm_launch import TrainShape
from pipeline_lib.workflow import Plan
from pipeline_lib.workflow.config_files import with_location
from pipeline_lib.workflow.plan import regex
from pipeline_lib.workflow.rules import (
    AverageRules,
    BacktranslationRules,
    DataRules,
    DecodeRules,
    EvaluateRules,
    ProfileRules,
    ReportRules,
    SubwordRules,
    TrainRules,
)
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

CONDA_ENV = "../envs/pipeline.yaml"

try:
    validate_config(config, load_schema(Path(workflow.basedir) / SCHEMA_FILE))
    PLAN = Plan(config)
except ConfigError as exc:
    # One clear line: a WorkflowError would add a traceback line pointing here.
    sys.exit(f"error: {with_location(exc, workflow.configfiles)}")
# the path table (pipeline_lib/workflow/paths.py) as patterns: P.trained, P.hyp, ...
P = PLAN.paths


def res_fn(rule, key, default=None):
    """A resource callable: the experiment's value (None drops it); a retry gets more time."""

    def fn(wildcards, attempt):
        value = PLAN.resources(wildcards.exp, rule).get(key, default)
        if key == "runtime" and value is not None:
            return value * attempt
        return value

    return fn


def train_launcher(wildcards, resources):
    keys = ("gpu", "nodes", "tasks_per_node", "mpi")
    shape = {k: getattr(resources, k, None) for k in keys}
    return TrainShape.from_resources(shape).launcher()


def train_priority(wildcards):
    return PLAN.train_priority(wildcards.exp)
