"""The GPU measurement scripts' plumbing, on the CPU: what bench/gpu_evidence.py runs on a short GPU lease
must measure what it says (no validation inside a timed stretch), find the checkout from every step,
and spend no lease time on a step whose packages the machine lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from bench_scripts import load_bench_script

REPO = Path(__file__).resolve().parents[2]


TINY = ["--device", "cpu", "--vocab", "300", "--d-model", "64", "--ffn", "128", "--heads", "2",
        "--encoder-layers", "2", "--decoder-layers", "2", "--max-tokens", "512", "--threads", "1"]  # fmt: skip


def test_the_loop_benchmark_times_training_only(tmp_path: Path):
    """Run as typed, the loop benchmark reports its timed updates; the trainer's default dev points
    (about ten a run) stay out of the stretch, or the script refuses to report a rate."""
    out = tmp_path / "loop.json"
    argv = [sys.executable, "bench/train_throughput.py", *TINY, "--loop", "--updates", "6", "--warmup", "2",
            "--json", str(out)]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["timed_updates"] == 6 and result["warmup_updates"] == 2
    assert result["tokens_per_s_min"] <= result["tokens_per_s_median"] <= result["tokens_per_s_max"]
    # one validation, after the last update: the run's end, not inside the stretch
    assert done.stderr.count("valid loss") == 1 and "update 8: valid" in done.stderr


def _log(save_dir: Path, valid_after: list[int]) -> None:
    records = [{"kind": "train", "update": u, "time": float(u), "tokens_per_s": 100.0, "tokens_per_update": 100,
                "updates_per_s": 1.0, "memory_mb": 1.0, "memory_kind": "rss"} for u in range(1, 9)]  # fmt: skip
    records += [{"kind": "valid", "update": u, "loss": 1.0} for u in valid_after]
    (save_dir / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize(
    ("valid_after", "refused"),
    [([1], False), ([8], False), ([2], True), ([5], True), ([1, 7], True)],
)
def test_a_validation_inside_the_timed_stretch_is_refused(tmp_path: Path, valid_after, refused):
    """Warm-up updates 1-2, timed 3-8: a validation after update 2..7 lands in a timed update's time."""
    bench = load_bench_script("train_throughput")
    _log(tmp_path, valid_after)
    trainer = SimpleNamespace(cfg=SimpleNamespace(save_dir=str(tmp_path)))
    args = SimpleNamespace(warmup=2, deferred_stats=False, compile=False, checkpoint_activations=False,
                           compile_mode="default", residual="post_ln", amp="none", device="cpu", max_tokens=512,
                           update_freq=1, lengths=(10, 40), vocab=300, pad_to_multiple=1, threads=1)  # fmt: skip
    model = SimpleNamespace(encoder_layers=2, decoder_layers=2, d_model=64, ffn_dim=128, heads=2, dropout=0.1,
                            attention_dropout=0.0, activation_dropout=0.0, describe=lambda: "2L-2L")  # fmt: skip
    if refused:
        with pytest.raises(SystemExit, match="inside the timed stretch"):
            bench.loop_result(trainer, args, model, (10, 40), 1.0)
    else:
        assert bench.loop_result(trainer, args, model, (10, 40), 1.0)["timed_updates"] == 6


def test_a_step_without_its_packages_is_skipped_and_costs_nothing(tmp_path: Path):
    evidence = load_bench_script("gpu_evidence")
    step = evidence.Step(
        "x", ["-c", "pass"], 10, 0, ("json", "no_such_module_x", "exe:sh", "exe:no-such-program-x")
    )
    assert evidence.missing(step) == ["no_such_module_x", "exe:no-such-program-x"]
    assert all("jsonschema" in s.needs for s in evidence.steps() if s.name.startswith(("plan_", "gpu_demo")))


def test_every_step_finds_the_checkout_first_on_its_path(tmp_path: Path, monkeypatch):
    """A step runs ``bench/X.py`` on the machine's own interpreter, where the checkout is not installed:
    its imports of pipeline_lib resolve through PYTHONPATH, this checkout ahead of anything set."""
    evidence = load_bench_script("gpu_evidence")
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    step = evidence.Step("path", ["-c", "import os, pipeline_lib; print(os.environ['PYTHONPATH'])"], 60, 0)
    with open(tmp_path / "log", "w") as log:
        record = evidence.run_step(step, tmp_path, log, 60, tmp_path)
    assert record["status"] == "ok"
    assert record["output_tail"].strip().split(os.pathsep) == [str(REPO), "/somewhere/else"]


def test_a_step_s_own_environment_reaches_it_alone(tmp_path: Path, monkeypatch):
    """The CUDA-graph diagnosis step sets TORCH_LOGS for its own pytest run, not for the steps after it,
    and its pytest counts are read like the test step's."""
    evidence = load_bench_script("gpu_evidence")
    monkeypatch.delenv("TORCH_LOGS", raising=False)
    debug = next(s for s in evidence.steps() if s.name == "cuda_graphs_debug")
    assert dict(debug.env) == {"TORCH_LOGS": "+cudagraphs"} and "pytest" in debug.argv
    show = ["-c", "import os; print(os.environ.get('TORCH_LOGS', 'unset'))"]
    with open(tmp_path / "log", "w") as log:
        own = evidence.run_step(evidence.Step("own", show, 60, 0, env=debug.env), tmp_path, log, 60, tmp_path)
        after = evidence.run_step(evidence.Step("after", show, 60, 0), tmp_path, log, 60, tmp_path)
    assert own["output_tail"].strip() == "+cudagraphs" and after["output_tail"].strip() == "unset"
    if not torch.cuda.is_available():  # the CUDA test skips here: its count is read from pytest's last line
        with open(tmp_path / "log", "a") as log:
            record = evidence.run_step(debug, tmp_path, log, 120, tmp_path)
        assert record["status"] == "ok" and record["result"] == {"skipped": 1}


def test_the_card_steps_run_end_to_end_in_miniature(tmp_path: Path):
    """The --cpu-smoke run of the card's training step (fairseq's fp16 semantics, which a CPU has too,
    and deferred statistics) and the plan's step: each ok, a rate measured, the plan priced."""
    names = ["enfr_60L12L_admin_card_fairseq_fp16_deferred", "plan_enfr_80GB"]
    argv = [sys.executable, "bench/gpu_evidence.py", "--cpu-smoke", "--out", str(tmp_path), "--steps", *names]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu-cpu-evidence.json").read_text())
    steps = report["steps"]
    assert {n: steps[n]["status"] for n in names} == dict.fromkeys(names, "ok")
    train = steps[names[0]]["result"]
    assert train["levers"] == ["deferred_stats"] and train["amp"] == "fairseq_fp16"
    assert train["tokens_per_s_aggregate"] > 0
    assert "| enfr_60L12L_admin |" in steps["plan_enfr_80GB"]["result"]["table"]


@pytest.mark.slow
def test_our_side_of_the_fairseq_comparison_trains_and_counts_each_update_once(tmp_path: Path):
    """bench/compare.py runs our trainer through bench/peers/shim.py, which times optimizer steps and
    counts the target tokens of each update where the updater receives them: one batch of at most
    --max-tokens per update, at the rate the trainer's own log gives."""
    out = tmp_path / "compare.json"
    argv = [sys.executable, "bench/compare.py", "--toolkits", "deepnmt", "--device", "cpu", "--precision", "fp32",
            "--preset", "small", "--words", "300", "--threads", "2", "--max-tokens", "512", "--updates", "3",
            "--warmup", "2", "--no-decode", "--json", str(out)]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ours = json.loads(out.read_text())["toolkits"]["deepnmt"]
    assert ours["status"] == "ok", ours.get("error")
    train = ours["train"]
    assert train["timed_updates"] == 3 and 0 < train["target_tokens_per_update"] <= 512
    assert 0.5 < train["tokens_per_s_median"] / train["own_log_tokens_per_s_median"] < 2


def test_the_flagship_steps_time_the_job_the_plan_gives_a_141_gb_card():
    """The 60L-12L card steps and their fairseq side-by-side train one GPU's share of the En-Fr
    recipe's update, shaped as `plan --gpu-memory-gb 141` shapes it (ours) and as the authors' config
    states it (fairseq): bench constants that drift from the plan would time another job."""
    import copy

    from pipeline_lib.workflow.cli_check_config import check
    from pipeline_lib.workflow.plan import Plan

    evidence = load_bench_script("gpu_evidence")
    config = copy.deepcopy(check([REPO / "config.wmt14_en_fr.yaml"], REPO).config)
    config["card"] = {"memory_gb": 141}
    plan = Plan(config)
    card, authors = plan.train_shape(evidence.FLAGSHIP), plan.authors_shape(evidence.FLAGSHIP)
    assert (card.max_tokens, card.update_freq) == (evidence.CARD_TOKENS, evidence.CARD_UPDATE_FREQ)
    assert (authors.max_tokens, authors.update_freq) == (
        evidence.AUTHORS_TOKENS,
        evidence.AUTHORS_UPDATE_FREQ,
    )
    assert card.tokens_per_update == authors.tokens_per_update  # the same update, one GPU's share each
    assert card.gpus == authors.gpus
    flagship = plan.experiments[evidence.FLAGSHIP]
    steps = {s.name: s.argv for s in evidence.steps()}
    for name in ("enfr_60L12L_admin_card_bf16", "compare_60L12L_authors_shape"):
        argv = steps[name]
        layers = (
            int(argv[argv.index("--encoder-layers") + 1]),
            int(argv[argv.index("--decoder-layers") + 1]),
        )
        assert layers == (flagship["encoder_layers"], flagship["decoder_layers"])
    compare = steps["compare_60L12L_authors_shape"]
    per_gpu = int(compare[compare.index("--max-tokens") + 1])
    assert per_gpu == card.max_tokens * card.update_freq == authors.max_tokens * authors.update_freq


def test_our_side_of_the_flagship_comparison_is_the_card_shape_in_the_recipe_s_fp16(tmp_path: Path):
    """The GPU command compare.py gives our trainer for that step: the plan's 40,000 x 2, then the step's
    own flags after compare's `--amp fp16`, so that fairseq's fp16 semantics and --deferred-stats hold."""
    import shlex

    from pipeline_lib.cli import build_parser
    from pipeline_lib.train.cli import train_config_from_args

    load_bench_script("compare")  # puts bench/peers on the path and loads toolkits as compare.py does
    toolkits = sys.modules["toolkits"]
    argv = {s.name: s.argv for s in load_bench_script("gpu_evidence").steps()}["compare_60L12L_authors_shape"]
    extra = next(a.split("=", 1)[1] for a in argv if a.startswith("--deepnmt-train-args="))
    setup = toolkits.Setup(raw=tmp_path, work=tmp_path, updates=14, max_tokens=80000, threads=8, max_src_len=50,
                           device="cuda", precision="fp16", update_freq=2, extra_train=tuple(shlex.split(extra)))  # fmt: skip
    command = toolkits.TOOLKITS["deepnmt"].train(setup)
    args = build_parser("train").parse_args(command.args)
    cfg = train_config_from_args(args)
    assert (cfg.max_tokens, cfg.update_freq) == (40000, 2)
    assert cfg.amp == "fairseq_fp16" and cfg.deferred_stats
