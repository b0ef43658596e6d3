"""Reading a config never loads torch: every Snakefile parse (once per SLURM job), check-config, plan
and report import the workflow and report layers, and a login node without torch can dry-run."""

from __future__ import annotations

import subprocess
import sys

MODULES = [
    "pipeline_lib.workflow",
    "pipeline_lib.workflow.cli_check_config",
    "pipeline_lib.workflow.cli_plan",
    "pipeline_lib.report",
    "pipeline_lib.report.cli",
    "pipeline_lib.report.tables",
    "pipeline_lib.report.stability",
    "pipeline_lib.model.config",
    "pipeline_lib.train.config",
]


def test_the_workflow_and_report_layers_import_without_torch():
    code = f"import sys; import {', '.join(MODULES)}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_model_names_that_need_torch_still_import_from_the_package():
    code = (
        "from pipeline_lib.model import build_model, ModelConfig; import sys; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
