# Config validation, the resolved plan, and the input functions the rules share. The logic lives in
# pipeline_lib/workflow/ (plain Python, unit-tested); this file only wires it into Snakemake.
import sys
from pathlib import Path

from pipeline_lib.errors import ConfigError
from pipeline_lib.slurm_launch import TrainShape
from pipeline_lib.workflow import Commands, Plan
from pipeline_lib.workflow.config_files import with_location
from pipeline_lib.workflow.plan import regex
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

CONDA_ENV = "../envs/pipeline.yaml"

try:
    validate_config(config, load_schema(Path(workflow.basedir) / SCHEMA_FILE))
    PLAN = Plan(config)
except ConfigError as exc:
    # One clear line: a WorkflowError would add a traceback line pointing here.
    sys.exit(f"error: {with_location(exc, workflow.configfiles)}")
CMD = Commands(PLAN)
# the path table (pipeline_lib/workflow/paths.py) as patterns: P.trained, P.log("train"), ...
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


# ------------------------------------------------------------------------------------ input functions
def preprocess_inputs(wildcards):
    inputs = {"raw": PLAN.raw_marker(wildcards.ds)}
    mono = PLAN.mono_raw(wildcards.ds)
    if mono:
        inputs["mono"] = mono
    return inputs


def train_inputs(wildcards):
    inputs = {"data": PLAN.bin_marker(wildcards.exp)}
    if PLAN.needs_profile(wildcards.exp):
        inputs["profile"] = PLAN.admin_profile(wildcards.exp)
    return inputs


def bt_translate_inputs(wildcards):
    spec = PLAN.backtranslation[wildcards.bt]
    rev = spec["reverse_model"]
    return {
        "checkpoint": PLAN.checkpoint_avg(rev),
        "trained": PLAN.trained_marker(rev),
        "bpe": PLAN.bpe_marker(spec["dataset"]),
    }


def significance_inputs(wildcards):
    base, systems, _ = PLAN.significance[wildcards.table]
    return {
        "hyps": [PLAN.hyp_file(n) for n in [base, *systems]],
        "generate": [PLAN.generate_file(n) for n in [base, *systems]],
        "data": PLAN.ref_marker(PLAN.eval_dataset(base)),
    }


def analysis_inputs(wildcards):
    systems = PLAN.analysis_systems()
    ds = PLAN.eval_dataset(systems[0])
    return {
        "hyps": [PLAN.hyp_file(n) for n in systems],
        "data": [*PLAN.raw_marker(ds), PLAN.ref_marker(ds)],
    }
