"""A config cannot take the machine down: an alias bomb or an oversized file is refused in one line,
in little time and memory, by ``check-config`` and by the workflow (Snakemake's own ``--configfile``
load), and no error quotes a whole value."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.bounded_yaml import MAX_BYTES, check_expanded_size, safe_load_bounded
from pipeline_lib.workflow.config_files import load_mapping
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config
from tests.workflow.test_dryrun import REPO, SNAKEMAKE

DEMO_EXPERIMENT = "  demo_6L6L_postln: {dataset: bible_enfr, encoder_layers: 6, decoder_layers: 6, width: d64, residual: post_ln, recipe: demo}\n"  # noqa: E501


def bomb_config(tmp_path: Path, levels: int = 9) -> Path:
    """The demo config with a 9 x 9 alias bomb as an experiment's ``seeds:`` (9^9 integers)."""
    parts = ["&a0 [1, 2, 3, 4, 5, 6, 7, 8, 9]"]
    parts += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    text = (REPO / "config.yaml").read_text(encoding="utf-8")
    assert DEMO_EXPERIMENT in text
    bomb = DEMO_EXPERIMENT.replace("recipe: demo}", f"recipe: demo, seeds: [{', '.join(parts)}]}}")
    path = tmp_path / "bomb.yaml"
    path.write_text(text.replace(DEMO_EXPERIMENT, bomb), encoding="utf-8")
    return path


# Run a command as the grandchild of a small Python parent that reports the peak RSS of its children:
# the bound is on what the refused command costs, not on what the test process holds.
MEASURE = (
    "import resource, subprocess, sys; "
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60); "
    "sys.stdout.write(p.stdout + p.stderr); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(f'@@ {p.returncode} {u.ru_maxrss} {u.ru_utime + u.ru_stime:.2f}')"
)


def run_measured(cmd: list[str], cwd: Path) -> tuple[int, str, float, float]:
    """(exit status, output, peak RSS in MB, CPU seconds) of ``cmd``; fails the test after 60 s. CPU
    time, not wall time: what the command costs, whatever else the machine runs."""
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, *cmd], cwd=cwd, capture_output=True, text=True, timeout=90
    )
    m = re.search(r"@@ (-?\d+) (\d+) ([\d.]+)\s*$", proc.stdout)
    assert m, (proc.stdout + proc.stderr)[-2000:]
    return int(m.group(1)), proc.stdout[: m.start()], int(m.group(2)) / 1024, float(m.group(3))


def test_check_config_refuses_an_alias_bomb_in_one_line_fast_and_small(tmp_path: Path):
    bomb = bomb_config(tmp_path)
    assert bomb.stat().st_size < 12_000  # the demo config plus ~450 bytes of anchors
    rc, out, peak_mb, cpu = run_measured(
        [sys.executable, "-m", "pipeline_lib", "check-config", str(bomb)], REPO
    )
    assert rc != 0
    lines = out.strip().splitlines()
    assert len(lines) == 1, out[-2000:]
    assert re.match(rf"error: {re.escape(str(bomb))}:\d+:\d+: .*alias", lines[0]), lines[0]
    assert len(lines[0]) < 400
    assert cpu < 2.0 and peak_mb < 200, (cpu, peak_mb)  # expanded, the 9^9 seeds take minutes and GBs


def test_snakemake_refuses_an_alias_bomb_before_validation(tmp_path: Path):
    bomb = bomb_config(tmp_path)
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "-n", "all"]
    rc, out, peak_mb, cpu = run_measured([*cmd, "--configfile", str(bomb)], tmp_path)
    assert rc != 0
    m = re.search(
        rf"{re.escape(str(bomb))}:(\d+): config key '(experiments\.demo_6L6L_postln\.seeds[.\d]*)'", out
    )
    assert m and "alias" in out, out[-2000:]
    assert "Traceback" not in out and "MemoryError" not in out
    # Snakemake's own start-up (its imports, the Snakefile) is most of this; the bomb adds ~nothing
    assert cpu < 30 and peak_mb < 400, (cpu, peak_mb)


def test_a_recursive_alias_is_refused_with_its_line(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("workdir: w\nloop: &a [1, *a]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))}:2:\d+: a YAML alias refers to a node"):
        load_mapping(path)


def test_an_oversized_file_is_refused_before_parsing(tmp_path: Path):
    path = tmp_path / "big.yaml"
    path.write_text("workdir: w\n" + "# padding\n" * (MAX_BYTES // 10), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"over the 1,048,576-byte limit"):
        load_mapping(path)


def test_bounds_leave_ordinary_aliases_alone(tmp_path: Path):
    text = "base: &b {lr: 0.001, betas: [0.9, 0.98]}\nother: *b\nmore: [*b, *b, *b]\n"
    assert safe_load_bounded(text, tmp_path / "x.yaml") == yaml.safe_load(text)
    for name in sorted(REPO.glob("config*.yaml")):
        check_expanded_size(load_mapping(name))


def test_a_loaded_config_that_contains_itself_is_refused():
    cfg: dict = {"experiments": {"e": {}}}
    cfg["experiments"]["e"]["seeds"] = [cfg["experiments"]]
    with pytest.raises(
        ConfigError, match=r"config key 'experiments.e.seeds.0': a value that contains itself"
    ):
        check_expanded_size(cfg)


def test_a_schema_error_quotes_only_the_start_of_a_long_value():
    cfg = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    cfg = copy.deepcopy(cfg)
    cfg["experiments"]["demo_6L6L_postln"]["seeds"] = [[f"seed-{i}" for i in range(5000)], 1]
    with pytest.raises(ConfigError) as info:
        validate_config(cfg, load_schema(REPO / SCHEMA_FILE))
    message = str(info.value)
    assert "experiments.demo_6L6L_postln.seeds.0" in message
    assert "seed-0" in message and "seed-4999" not in message and "more characters" in message
    assert len(message) < 400
