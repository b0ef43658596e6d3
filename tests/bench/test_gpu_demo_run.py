"""bench/gpu_demo_run.py, the GPU demo's runner, on the CPU: the command it runs (make's own line, runnable
on an interpreter whose packages came as wheels) and its verdicts on the issue's targets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo():
    return load_bench_script("gpu_demo_run")


def test_the_runner_runs_make_demo_gpu_s_snakemake_line_as_a_module(demo):
    """`python -m snakemake`: wheels installed with pip --target (bench/peers/offline_setup.sh) put no
    `snakemake` script beside the interpreter."""
    argv, configs = demo.command(pilot=True, cpu=False)
    assert argv[:3] == [sys.executable, "-m", "snakemake"]
    assert argv[3:6] == ["--profile", str(REPO / "profiles" / "local"), "all"]
    assert configs == ["config.gpu_demo.yaml", "bench/gpu_demo_pilot.yaml"]
    assert argv[argv.index("--configfile") + 1 :] == configs
    assert "--resources" in argv  # make's GPU slots stay
    argv, configs = demo.command(pilot=False, cpu=True)
    assert configs == ["config.gpu_demo.yaml", "config.gpu_demo_cpu.yaml"]
    assert argv[argv.index("all") + 1 : argv.index("--configfile")] == ["--cores", "2"]


def _finished(root: Path, runs: dict[str, tuple[str, float | None]]) -> dict:
    """A finished run's status and score files under ``root``; its config's experiments section."""
    cfg = {"workdir": "work", "results": "results", "experiments": {}}
    for name, (status, bleu) in runs.items():
        enc = int(name.split("L")[0])
        residual = name.split("_", 1)[1]
        cfg["experiments"][name] = {"encoder_layers": enc, "decoder_layers": 6, "residual": residual}
        exp = root / "work" / "experiments" / name
        exp.mkdir(parents=True)
        (exp / "status.json").write_text(json.dumps({"status": status}))
        if bleu is not None:
            out = root / "results" / "experiments" / name
            out.mkdir(parents=True)
            (out / "test.score.json").write_text(json.dumps({"scores": {"bleu": {"score": bleu}}}))
    return cfg


def test_the_verdicts_read_the_papers_claims(demo, tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    cfg = _finished(tmp_path, {
        "6L_post_ln": ("completed", 24.0), "6L_admin": ("completed", 24.5),
        "18L_post_ln": ("completed", 23.6), "18L_admin": ("completed", 25.0), "18L_pre_ln": ("completed", 24.4),
        "36L_post_ln": ("diverged", None), "36L_admin": ("completed", 25.5),
    })  # fmt: skip
    verdict = demo.claims(cfg)
    assert verdict["converged_at_target"] is True
    # 18L post-LN is 0.8 behind pre-LN, inside the 1-BLEU margin: it does not "trail"; 36L diverged
    assert verdict["deep_post_ln_fails_or_trails"] == {"18L-6L": False, "36L-6L": True}
    assert verdict["deepest_admin_at_least_6L6L"] is True
    assert verdict["rows"]["36L_post_ln"] == {"status": "diverged", "layers": (36, 6), "residual": "post_ln",
                                              "bleu": None}  # fmt: skip


def test_a_run_below_the_target_or_with_nothing_converged_misses(demo, tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "ROOT", tmp_path / "a")
    cfg = _finished(tmp_path / "a", {"6L_admin": ("completed", 21.0), "36L_admin": ("completed", 19.9),
                                     "36L_post_ln": ("completed", 18.8)})  # fmt: skip
    verdict = demo.claims(cfg)
    assert verdict["converged_at_target"] is False  # 19.9 < 20
    assert verdict["deepest_admin_at_least_6L6L"] is False
    assert verdict["deep_post_ln_fails_or_trails"] == {"36L-6L": True}  # 1.1 behind Admin
    monkeypatch.setattr(demo, "ROOT", tmp_path / "b")
    cfg = _finished(tmp_path / "b", {"6L_admin": ("diverged", None), "36L_admin": ("diverged", None)})
    assert demo.claims(cfg)["converged_at_target"] is False
