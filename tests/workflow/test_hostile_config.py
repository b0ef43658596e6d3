"""A config shared by another lab must not run code: hostile values in config keys that reach a rule
stay literal paths through a real Snakemake run, and names that become wildcards are restricted."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEMO = yaml.safe_load((REPO / "config.yaml").read_text())
HOSTILE_WORKDIR = "w;touch INJECTED;#"


def test_a_hostile_workdir_runs_no_code_in_a_real_snakemake_run(tmp_path: Path):
    cfg = copy.deepcopy(DEMO)
    cfg["workdir"] = HOSTILE_WORKDIR
    cfg["results"] = "r $(touch INJECTED2) `touch INJECTED3`"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    target = f"{HOSTILE_WORKDIR}/data/bible_enfr/raw/splits.json"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
         "--configfile", "config.yaml", "--cores", "1", target],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (tmp_path / target).is_file()
    assert not list(tmp_path.rglob("INJECTED*")), "a config value ran as shell code"


@pytest.mark.parametrize("section,name", [
    ("experiments", "x;touch INJECTED"), ("datasets", "d $(id)"), ("widths", "../w"),
])  # fmt: skip
def test_names_that_become_wildcards_are_restricted(section: str, name: str):
    cfg = copy.deepcopy(DEMO)
    first = next(iter(cfg[section]))
    cfg[section][name] = cfg[section].pop(first)
    with pytest.raises(ConfigError, match=rf"config key '{section}'"):
        validate_config(cfg, load_schema(REPO / SCHEMA_FILE))
