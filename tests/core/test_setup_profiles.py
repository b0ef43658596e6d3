"""setup_profiles links profiles/{slurm,local} where `snakemake --profile <name>` finds them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_lib.errors import ConfigError
from pipeline_lib.setup_profiles import REPO_ROOT, link_profiles

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
SNAKEFILE = (
    'rule all:\n    output: "a.txt"\n    resources: gpu=1\n    shell: "echo {resources.gpu} > {output}"\n'
)


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_main_links_profiles_and_snakemake_resolves_them_by_name(tmp_path: Path):
    env = _env(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "pipeline_lib.setup_profiles"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    for name in ("slurm", "local"):
        link = tmp_path / "xdg" / "snakemake" / name
        assert link.is_symlink() and link.resolve() == REPO_ROOT / "profiles" / name
    # idempotent for our own links
    again = subprocess.run(
        [sys.executable, "-m", "pipeline_lib.setup_profiles"],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert again.returncode == 0 and "already linked" in again.stdout

    wf = tmp_path / "wf"
    wf.mkdir()
    (wf / "Snakefile").write_text(SNAKEFILE)
    # The local profile's settings are applied: all cores, gpu capped at 0, shell commands printed.
    proc = subprocess.run(
        [SNAKEMAKE, "--profile", "local", "all"], cwd=wf, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "Using profile local " in proc.stderr
    assert (wf / "a.txt").read_text().strip() == "0"
    assert "echo 0 > a.txt" in proc.stderr  # printshellcmds
    # The slurm profile resolves too (dry run: nothing is submitted).
    dry = subprocess.run(
        [SNAKEMAKE, "--profile", "slurm", "-n", "--forceall", "all"],
        cwd=wf,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert "Using profile slurm " in dry.stderr and "executor: slurm" not in dry.stderr
    # A missing profile is snakemake's clear error.
    missing = subprocess.run(
        [SNAKEMAKE, "--profile", "nosuchprofile", "-n"],
        cwd=wf,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode != 0 and "nosuchprofile" in missing.stderr


def test_refuses_to_replace_a_foreign_profile(tmp_path: Path):
    config_dir = tmp_path / "snakemake"
    (config_dir / "slurm").mkdir(parents=True)
    (config_dir / "slurm" / "config.yaml").write_text("executor: slurm\n")
    with pytest.raises(ConfigError, match="already exists and is not a link"):
        link_profiles(config_dir=config_dir, names=["slurm"])
    assert (config_dir / "slurm" / "config.yaml").read_text() == "executor: slurm\n"


def test_link_to_another_checkout_needs_force(tmp_path: Path):
    config_dir = tmp_path / "snakemake"
    config_dir.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (config_dir / "local").symlink_to(other)
    with pytest.raises(ConfigError, match="--force"):
        link_profiles(config_dir=config_dir, names=["local"])
    link_profiles(config_dir=config_dir, names=["local"], force=True)
    assert (config_dir / "local").resolve() == REPO_ROOT / "profiles" / "local"


def test_setup_keeps_another_checkouts_link_and_says_how_to_choose(tmp_path: Path):
    config_dir = tmp_path / "snakemake"
    config_dir.mkdir()
    other = tmp_path / "other_checkout" / "profiles" / "local"
    other.mkdir(parents=True)
    (config_dir / "local").symlink_to(other)
    [line] = link_profiles(config_dir=config_dir, names=["local"], keep_others=True)
    assert (config_dir / "local").resolve() == other  # untouched
    assert "kept" in line and str(other) in line and "make profiles" in line
    [line] = link_profiles(config_dir=config_dir, names=["local"], force=True)
    assert line.startswith("local: re-pointed") and f"was -> {other}" in line  # not the "linked" line
    assert (config_dir / "local").resolve() == REPO_ROOT / "profiles" / "local"


def test_a_link_to_a_removed_checkout_is_re_pointed_saying_so(tmp_path: Path):
    config_dir = tmp_path / "snakemake"
    config_dir.mkdir()
    (config_dir / "local").symlink_to(tmp_path / "gone")
    [line] = link_profiles(config_dir=config_dir, names=["local"], keep_others=True)
    assert "re-pointed" in line and "no longer exists" in line
    assert (config_dir / "local").resolve() == REPO_ROOT / "profiles" / "local"
