"""The report spec as the workflow writes it: a file whose rules' params carry only its digest.

Snakemake reruns a job whose params changed and prints the old and the new value in its reason;
the spec as a param (it was once passed as ``--spec-json``) printed about 10 kB twice after a beam
edit. The rules now get the spec's digest as their param and write the spec itself
(``workflow/rules/report.smk``). The learning curves read a spec of their own, holding only what the
plot reads (the training logs and the labels), so an edit to decoding or the tables leaves them be.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from pipeline_lib.atomic import write_text

# what learning_curves() reads of an experiment: its logs and its label (report/labels.py)
CURVE_KEYS = ("label", "encoder_layers", "decoder_layers", "width", "residual", "init", "backtranslation")
CURVE_FILES = ("status", "train_log")


def spec_digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def curves_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of the report spec the learning curves read."""
    keys = CURVE_KEYS + CURVE_FILES
    return {"experiments": {n: {k: info.get(k) for k in keys} for n, info in spec["experiments"].items()}}


def write_spec(
    spec: dict[str, Any], path: str | os.PathLike[str], log: str | os.PathLike[str] | None = None
) -> None:
    """Indented, sorted keys; with ``snakefile`` in it, the working directory of the run is added
    (the tables' rerun hint: report/tables.py, ``rerun_command``). ``log``: the job's log line."""
    digest = spec_digest(spec)  # the rule's param
    if "snakefile" in spec:
        spec = {**spec, "workdir": os.getcwd()}
    write_text(path, json.dumps(spec, indent=2, sort_keys=True) + "\n")
    if log is not None:
        write_text(log, f"wrote {path} (spec digest {digest})\n")
