"""Config problems point at the file and line: YAML syntax errors, schema and cross-reference errors.

Snakemake merges config files before the workflow sees them and reports a YAML syntax error without
file or line; `check-config`, `plan` and the Snakefile's own load of config.yaml name both.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.config_files import load_mapping, locate_key
from tests.workflow.test_dryrun import REPO, run_snakemake

SHIPPED = [
    ["config.yaml"],
    ["config.wmt14_en_fr.yaml"],
    ["config.wmt14_en_de.yaml", "config.smoke.yaml"],
    ["config.iwslt14_fig10.yaml"],
    ["config.wmt14_en_de_dlcl_lipschitz.yaml"],
    ["config.demo_bt.yaml"],
    ["config.stability_methods.yaml"],
    ["config.gpu_demo.yaml"],
    ["config.gpu_demo.yaml", "config.gpu_demo_24gb.yaml"],
    ["config.gpu_demo.yaml", "config.gpu_demo_cpu.yaml"],
]


def pipeline(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline_lib", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def key_path_at(text: str, lineno: int) -> str:
    """The dotted key written on line ``lineno`` of a block-style YAML text, read off the indentation
    of the lines above it (independent of the code under test, which walks PyYAML's node tree)."""
    lines = text.splitlines()[:lineno]
    parts: list[str] = []
    indent = None
    for line in reversed(lines):
        m = re.match(r"^( *)([^\s:#-][^:]*):", line)
        if m and (indent is None or len(m.group(1)) < indent):
            parts.append(m.group(2).strip().strip("'\""))
            indent = len(m.group(1))
    return ".".join(reversed(parts))


@pytest.mark.parametrize("files", SHIPPED, ids=lambda f: "+".join(f))
def test_shipped_configs_pass_check_config_as_typed(files: list[str]):
    proc = pipeline("check-config", *files, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "valid (" in proc.stdout


def test_yaml_syntax_error_names_file_line_and_column(tmp_path: Path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("workdir: w\nresults: r\ndatasets:\n  a: [1, 2\n  b: 3\n", encoding="utf-8")
    proc = pipeline("check-config", str(bad), cwd=REPO)
    assert proc.returncode == 2
    assert f"{bad}:5:4: YAML syntax error" in proc.stderr, proc.stderr
    assert "began at line 4" in proc.stderr and "      b: 3\n       ^" in proc.stderr
    assert "Traceback" not in proc.stderr
    # plan checks first, so its error is the located one rather than snakemake's generic message
    proc = pipeline("plan", "--configfile", str(bad), cwd=REPO)
    assert proc.returncode == 2 and f"{bad}:5:4:" in proc.stderr, proc.stderr


def test_snakefile_names_the_line_of_a_broken_default_config(tmp_path: Path):
    (tmp_path / "config.yaml").write_text("workdir: w\nresults: [r\n", encoding="utf-8")
    proc = run_snakemake(["-n", "all"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"config\.yaml:3:1: YAML syntax error.*began at line 2", out), out[-2000:]
    assert 'File "' not in out and "Traceback" not in out


def test_a_non_mapping_config_is_named(tmp_path: Path):
    (tmp_path / "list.yaml").write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"list\.yaml:1: a config file is a mapping"):
        load_mapping(tmp_path / "list.yaml")


def _broken_copy(tmp_path: Path, name: str, mutate) -> Path:
    cfg = yaml.safe_load((REPO / name).read_text(encoding="utf-8"))
    mutate(cfg)
    path = tmp_path / f"bad_{name}"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "mutate", "key"),
    [
        ("config.wmt14_en_fr.yaml", lambda c: c["recipes"]["enfr"].update(warmup_update=1), "recipes.enfr.warmup_update"),
        ("config.yaml", lambda c: c["widths"]["d64"].update(d_model=66), "widths.d64.heads"),
        ("config.yaml", lambda c: c["experiments"]["demo_6L6L_admin"].update(recipe="nope"),
         "experiments.demo_6L6L_admin.recipe"),
        # a missing required key points at the mapping that lacks it
        ("config.yaml", lambda c: c["datasets"]["bible_enfr"].pop("src"), "datasets.bible_enfr"),
    ],
)  # fmt: skip
def test_snakemake_error_points_at_the_line_of_the_key(tmp_path: Path, name: str, mutate, key: str):
    bad = _broken_copy(tmp_path, name, mutate)
    proc = run_snakemake(["-n", "all", "--configfile", str(bad)], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    m = re.search(rf"{re.escape(str(bad))}:(\d+): config key '([^']+)'", out)
    assert m, out[-2000:]
    assert key_path_at(bad.read_text(encoding="utf-8"), int(m.group(1))) == key
    assert m.group(2).startswith(key)
    assert 'File "' not in out and "Traceback" not in out  # one clear message, no traceback


def test_the_last_file_that_sets_a_key_is_named(tmp_path: Path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("recipes:\n  r:\n    lr: 1\n    warmup_updates: 2\n", encoding="utf-8")
    second.write_text("# override\nrecipes:\n  r:\n    lr: 3\n", encoding="utf-8")
    assert locate_key("recipes.r.lr", [first, second]) == f"{second}:4"
    assert locate_key("recipes.r.warmup_updates", [first, second]) == f"{first}:4"
    # not written anywhere (a schema default): the deepest part that is written
    assert locate_key("recipes.r.max_epoch", [first, second]) == f"{second}:3"
    assert locate_key("decoding.default", [first, second]) is None


COMMAND = re.compile(r"^#\s+(snakemake\s.*)$", re.M)


def test_commands_in_config_and_snakefile_headers_name_the_target_before_configfile():
    """`--configfile` takes every word after it as a config file (nargs=+), so `... --configfile c.yaml
    all` fails with "No such file: 'all'": a target must come before it."""
    commands = []
    for path in [REPO / "Snakefile", *sorted(REPO.glob("config*.yaml"))]:
        commands += [(path.name, c) for c in COMMAND.findall(path.read_text(encoding="utf-8"))]
    assert len(commands) >= 7, commands
    for where, command in commands:
        words = command.split("#")[0].split()
        if "--configfile" in words:
            files = words[words.index("--configfile") + 1 :]
            assert files and all(w.endswith((".yaml", ".yml")) for w in files), (where, command)


def test_no_experiments_and_no_stability_map_is_a_config_error(tmp_path: Path):
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["experiments"], cfg["tables"] = {}, {}
    del cfg["stability_map"]
    path = tmp_path / "empty.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = pipeline("check-config", str(path), cwd=REPO)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "config key 'experiments': is empty and there is no stability_map" in proc.stderr, proc.stderr
