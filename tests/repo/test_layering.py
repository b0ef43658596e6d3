"""The package's import graph runs one way: stages use the model and data layers and the shared
modules, never each other, and nothing below a stage imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline_lib"

# Shared leaf modules any layer may use (the residual registry is names and labels, no torch).
SHARED = {
    "errors",
    "atomic",
    "digest",
    "run_lock",  # one process per run directory: train, download
    "lang_code",  # the language-code pattern: the schema and every stage CLI
    "dataclass_cli",
    "field_spec",
    "letters",
    "thread_local",
    "named_registry",  # the shape the three registries share
    "model.registry",
    "evaluate.metric_registry",  # metric names, labels, directions: the workflow and report read them
    "report.table_registry",  # the table kinds: the plan, the config checks and the report read them
}
# Modules counted on their own rather than as part of their package.
SUBMODULES = {
    "model.registry",
    "evaluate.metric_registry",
    "report.table_registry",
    "cpu.threads",
    "cpu.allocator",
    "cpu.onednn",
    "cpu.weight_grad_sharing",
    "cpu.gemm_names",
    "decode.search_config",  # the search settings, torch-free: the workflow schema reads them
    "evaluate.significance_settings",  # likewise the paired bootstrap's
    "evaluate.score_settings",  # and score's
    "backtranslation.mix_settings",  # and bt-mix's
    "decode.decoding_entry",  # --decoding NAME: a workflow config's decoding entry as translate flags
}
# The CPU fast path plugs into the model from outside: the model imports nothing from cpu/.
CPU = {"cpu.threads", "cpu.allocator", "cpu.onednn", "cpu.weight_grad_sharing", "cpu.gemm_names"}
# component -> what else it may import (besides itself and SHARED).
ALLOWED: dict[str, set[str]] = {
    "data": set(),
    "model": set(),
    "checkpoint": {"model"},
    "divergence": {"data"},  # the rule reads the training targets (unigram threshold)
    "slurm_launch": set(),
    "setup_profiles": set(),
    "train": {"data", "model", "checkpoint", "divergence", *CPU},
    "cpu.weight_grad_sharing": {"model", "cpu.onednn"},
    "cpu.onednn": {"model", "cpu.gemm_names"},
    "cpu.gemm_names": set(),
    "cpu.threads": set(),
    "cpu.allocator": set(),
    "cpu": set(),
    "decode": {
        "data",
        "model",
        "checkpoint",
        "divergence",
        "cpu.onednn",
        "cpu.threads",
        "cpu.allocator",
        "cpu.gemm_names",
        "decode.search_config",
        "decode.decoding_entry",
    },
    "decode.search_config": set(),
    # reads a workflow config as snakemake would (validated, file:line errors), inside the function
    "decode.decoding_entry": {"workflow", "decode.search_config"},
    "evaluate": {"data", "divergence", "evaluate.significance_settings", "evaluate.score_settings"},
    "evaluate.significance_settings": set(),
    "evaluate.score_settings": set(),
    "backtranslation.mix_settings": set(),  # data: the Moses test-set tokenization tokenized BLEU needs
    "backtranslation": {"data", "backtranslation.mix_settings"},
    # export maps a checkpoint and the decoder's settings into the peers' terms (fairseq, CTranslate2)
    "export": {"data", "model", "checkpoint", "decode", "decode.search_config", "decode.decoding_entry"},
    "report": {"divergence"},
    # data: the data stages' settings (their flags and schema keys)
    "workflow": {
        "data",
        "model",
        "train",
        "divergence",
        "decode.search_config",
        "evaluate.significance_settings",
        "evaluate.score_settings",
        "backtranslation.mix_settings",
    },
    "job_signals": set(),
    "cli": set(),
    "__main__": {"cli", "job_signals"},
    "__init__": set(),
}


def component(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return rel.stem
    own = f"{rel.parts[0]}.{Path(rel.parts[1]).stem}"
    return own if own in SUBMODULES else rel.parts[0]


def imported_components(path: Path) -> set[tuple[str, int]]:
    """(component of pipeline_lib, line) of every import in the file, function-level ones included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if node.module == "pipeline_lib":
                names = [f"pipeline_lib.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "pipeline_lib" and len(parts) > 1:
                target = ".".join(parts[1:3]) if ".".join(parts[1:3]) in SUBMODULES else parts[1]
                found.add((target, node.lineno))
    return found


def test_every_module_is_placed_in_a_layer():
    unplaced = {component(p) for p in PACKAGE.rglob("*.py")} - set(ALLOWED) - SHARED
    assert not unplaced, f"add these to ALLOWED in {__file__}: {sorted(unplaced)}"


def test_no_upward_or_sideways_import():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = component(path)
        allowed = ALLOWED.get(own, set()) | SHARED | {own}
        for target, line in sorted(imported_components(path)):
            if target not in allowed:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {own} imports {target}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source,expected", [
    ("from pipeline_lib.train.loss import x\n", {("train", 1)}),
    ("def f():\n    import pipeline_lib.report.tables\n", {("report", 2)}),
    ("from pipeline_lib import checkpoint\n", {("checkpoint", 1)}),
    ("from .sibling import x\nimport torch\n", set()),
])  # fmt: skip
def test_the_walker_sees_every_import_form(tmp_path: Path, source: str, expected: set):
    f = tmp_path / "m.py"
    f.write_text(source)
    assert imported_components(f) == expected
