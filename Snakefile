# deepnmt-repro: deep-Transformer NMT reproduction (Admin, pre-LN, DLCL, Lipschitz init).
#
#   snakemake --profile profiles/local all                                  # the CPU demo
#   snakemake --profile profiles/slurm all --configfile config.wmt14_en_fr.yaml
#
# Stages are `python -m pipeline_lib <stage>`; the rules only wire files together.


import os
import sys

from pipeline_lib.errors import ConfigError
from pipeline_lib.job_signals import STOP_WITH_PARENT
from pipeline_lib.workflow import signal_relay
from pipeline_lib.workflow.config_files import load_mapping

# A stop sent to Snakemake alone (kill <pid>, SIGTERM) reaches the running jobs, and a job whose
# Snakemake dies goes with it (pipeline_lib/workflow/signal_relay.py, pipeline_lib/job_signals.py).
os.environ[STOP_WITH_PARENT] = "1"


onstart:
    signal_relay.install()


# A --configfile replaces the demo default instead of merging over it, as the catalog workflows do:
# a paper config is complete by itself and nothing of the demo enters its DAG.
if not workflow.overwrite_configfiles:
    # Snakemake's own message for a YAML syntax error names neither file nor line.
    try:
        load_mapping("config.yaml")
    except ConfigError as exc:
        sys.exit(f"error: {exc}")

    configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/subword.smk"
include: "workflow/rules/backtranslation.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/average.smk"
include: "workflow/rules/decode.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"


localrules:
    all,
    report_spec,
    curves_spec,


rule all:
    default_target: True
    input:
        PLAN.all_targets(),
