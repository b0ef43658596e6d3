"""Issues 45 and 51's GPU measurements in one run, each step a subprocess with its own time limit.

    python bench/gpu_evidence.py --out bench/results [--deadline 560] [--steps NAME ...]
    .venv/bin/python bench/gpu_evidence.py --cpu-smoke --out /tmp/ev   # every step, tiny, on the CPU

Steps, in priority order (a GPU lease is short: what matters most runs first, and a step that cannot
finish before ``--deadline`` is recorded as skipped, not started):

1. ``cuda_tests``: ``pytest tests/train/test_cuda.py`` (bf16/fp16 AMP, GPU decoding = CPU, NCCL, torchrun,
   deferred statistics, compile and CUDA graphs against eager).
1a. ``fp16_numerics`` (issue 50, ``bench/fp16_numerics.py``): fairseq_fp16 against fairseq ``--fp16``, the
   loss-scale sequences side by side, and an 18L-18L post-LN run without warm-up under each precision.
1b. Issue 51 (:func:`card_steps`): 60L-12L Admin at one GPU's share of its En-Fr recipe's 1,280,000
   target tokens per update, 40,000 x 2 as ``plan --gpu-memory-gb 141`` shapes it: bf16, then the
   recipe's fairseq_fp16 plain, with ``--deferred-stats`` and with ``--compile`` too; the same job
   beside fairseq split as the authors split it (5,000 x 16, ``compare.py --fairseq-update-freq 16``;
   both post-LN, fairseq has no Admin); Big 6L-6L fp16 plain, deferred, deferred and compiled; autocast fp16 and CUDA graphs
   (``--compile-mode reduce-overhead``); back-translation sampling (``--modes sample``) of 2,000
   sentences with the Big model beside fairseq, with the hours for 21.8M sentences; the rate table
   rebuilt with this run's results (``bench/gpu_rates.py --also <out>``) and ``plan --experiments-only``
   for the En-Fr config on 80 and 141 GB cards.
2. Transformer-base 6L-6L, bf16, 16k target tokens per update, the trainer's own loop
   (``bench/train_throughput.py --loop``): plain, ``--deferred-stats``, ``--compile --pad-to-multiple 8``.
3. 60L-12L Admin (ω from the closed form), base width, bf16, 3,584 target tokens per update, sentences of
   20-44 tokens (mean 32, what the plan's estimate assumes): with and without ``--checkpoint-activations``;
   peak ``max_memory_allocated`` against ``pipeline_lib.model.memory_estimate``.
4. fairseq side by side (``bench/compare.py``), base 6L-6L: fp16 for both (fairseq 0.12's ``--bf16``
   means TPU), cuDNN attention off for both (as our trainer does by itself).
5. Beam-10 decoding of 2,000 sentences, 60L-12L, outputs of exactly 30 tokens, fairseq side by side
   (2 training updates: the weights are near-random, as the issue allows).
6. Transformer-big 6L-6L (d=1024, 16 heads, FFN 4096): the three bf16 runs of step 2, then fairseq side
   by side in fp16.
7. Issue 56, the GPU demo (``bench/gpu_demo_run.py``, :func:`demo_steps`): ``gpu_demo_pilot`` runs
   config.gpu_demo.yaml's DAG at 1 epoch / 100 updates a model and projects the full run's wall;
   ``gpu_demo`` runs ``make demo-gpu``'s Snakemake command, times it and copies its tables.md,
   stability_map.md and plots to ``<out>/gpu_demo/``. Each stops resumably before its step's time is
   up; called again (``--steps gpu_demo``), it resumes and adds the walls. Alone:
   ``--steps gpu_demo_pilot gpu_demo``.
8. ``cuda_graphs_debug``: the CUDA-graph test alone with ``TORCH_LOGS=+cudagraphs``, for the failure
   docs/gpu.md describes.

A step whose modules (``Step.needs``) this interpreter cannot find is recorded as skipped, not run;
the steps run with this checkout first on ``PYTHONPATH``. On a GPU machine with no package index,
``bench/peers/offline_wheels.sh`` (here) and ``bench/peers/offline_setup.sh`` (there) bring the rest.

Everything lands in one JSON (``gpu-<card>-evidence.json`` under ``--out``), rewritten after every step so
that a run cut short keeps what it measured; ``--previous`` merges the steps an earlier, cut-short run
finished. MFU is given against the matmul peak measured in the same run and against the card's datasheet
dense bf16 peak.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pipeline_lib.atomic import write_json  # noqa: E402

# Datasheet dense (no sparsity) bf16 tensor-core peaks, TFLOP/s (NVIDIA's H100/H200 product briefs).
DENSE_BF16_TFLOPS = {"H200": 989.4, "H100 80GB HBM3": 989.4, "H100 PCIe": 756.0, "H100 NVL": 835.0}

PYTEST = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
BASE = ["--d-model", "512", "--ffn", "2048", "--heads", "8"]
BIG = ["--d-model", "1024", "--ffn", "4096", "--heads", "16"]
LOOP = ["--device", "cuda", "--amp", "bf16", "--vocab", "32000", "--loop", "--threads", "4"]
COMPARE = ["--toolkits", "fairseq", "deepnmt", "--device", "cuda", "--precision", "fp16", "--words", "32000",
           "--threads", "8", "--no-cudnn-attention", "--timeout", "240"]  # fmt: skip


# What a step imports or runs beyond torch and numpy: a GPU image without a package index may lack them
# (bench/peers/offline_wheels.sh lists the wheels to carry), and a step that would fail on an import
# should cost no lease time.
PLAN_NEEDS = ("yaml", "jsonschema")
DEMO_NEEDS = (*PLAN_NEEDS, "snakemake", "sacremoses", "subword_nmt", "sentencepiece", "sacrebleu", "pandas",
              "matplotlib", "exe:make")  # fmt: skip


@dataclass(frozen=True)
class Step:
    name: str
    argv: list[str]  # after the python executable; {json} is replaced by the step's result file
    timeout: float  # seconds
    expected: float  # seconds it usually takes: not started when less than this is left
    needs: tuple[str, ...] = ()  # modules, or "exe:NAME" for a program on PATH
    env: tuple[tuple[str, str], ...] = ()  # set for this step only


def missing(step: Step) -> list[str]:
    """What ``step`` needs that this interpreter (with the checkout on its path) cannot find."""
    gone = []
    for need in step.needs:
        if need.startswith("exe:"):
            found = shutil.which(need[4:]) is not None
        else:
            found = importlib.util.find_spec(need) is not None
        if not found:
            gone.append(need)
    return gone


def child_env(extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The steps' environment: this checkout first on PYTHONPATH, since a step runs ``bench/X.py`` (whose
    own folder, not the checkout, heads its path) on an interpreter that may not have it installed."""
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        **dict(extra),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *([path] if path else [])]),
    }


def steps() -> list[Step]:
    tt, cmp = "bench/train_throughput.py", "bench/compare.py"
    loop16k = [*LOOP, "--max-tokens", "16384", "--updates", "20", "--warmup", "8", "--json", "{json}"]
    compiled = ["--compile", "--pad-to-multiple", "8", "--warmup", "12"]
    deep = [*LOOP, *BASE, "--encoder-layers", "60", "--decoder-layers", "12", "--residual", "admin",
            "--max-tokens", "3584", "--lengths", "20", "44", "--updates", "15", "--warmup", "5", "--json", "{json}"]  # fmt: skip
    train_cmp = [
        "--max-tokens",
        "16384",
        "--updates",
        "20",
        "--warmup",
        "8",
        "--no-decode",
        "--json",
        "{json}",
    ]
    return [
        Step(
            "cuda_tests",
            [*PYTEST, "tests/train/test_cuda.py"],
            240,
            60,
        ),
        # issue 50: fairseq_fp16 against fairseq --fp16, and a deep post-LN run under each precision
        Step("fp16_numerics", ["bench/fp16_numerics.py", "--out", "{out}", "--run-timeout", "90"], 600, 400),
        *card_steps(),
        Step("base_bf16", [tt, *loop16k, *BASE], 90, 15),
        Step("base_bf16_deferred", [tt, *loop16k, *BASE, "--deferred-stats"], 90, 15),
        Step("base_bf16_compile", [tt, *loop16k, *BASE, *compiled], 180, 60),
        Step("60L12L_admin_bf16", [tt, *deep], 120, 20),
        Step("60L12L_admin_bf16_ckpt", [tt, *deep, "--checkpoint-activations"], 120, 20),
        Step("compare_base_fp16", [cmp, *COMPARE, "--preset", "base", *train_cmp], 240, 70),
        Step(
            "decode_60L12L_beam10",
            [
                cmp,
                *COMPARE,
                "--preset",
                "base",
                "--encoder-layers",
                "60",
                "--decoder-layers",
                "12",
                "--max-tokens",
                "4096",
                "--updates",
                "1",
                "--warmup",
                "1",
                "--decode-sentences",
                "2000",
                "--beam",
                "10",
                "--modes",
                "fixed",
                "--json",
                "{json}",
            ],
            300,
            90,
        ),  # fmt: skip
        Step("big_bf16", [tt, *loop16k, *BIG], 90, 15),
        Step("big_bf16_deferred", [tt, *loop16k, *BIG, "--deferred-stats"], 90, 15),
        Step("big_bf16_compile", [tt, *loop16k, *BIG, *compiled], 180, 60),
        Step("compare_big_fp16", [cmp, *COMPARE, "--preset", "big", *train_cmp], 240, 80),
        *demo_steps(),
        # the CUDA-graph failure of 2026-11-28 (docs/gpu.md) with inductor's cudagraph-tree decisions logged
        # (recording, warm-up, freeing a path): which call freed the activation its backward then read
        Step(
            "cuda_graphs_debug",
            [*PYTEST, "-s", "tests/train/test_cuda.py::test_cuda_graphs_follow_eager"],
            180,
            60,
            env=(("TORCH_LOGS", "+cudagraphs"),),
        ),
    ]


def demo_steps() -> list[Step]:
    """Issue 56: the GPU demo's pilot, then the demo. ``{timeout}`` is the step's time less a margin,
    so that the run stops itself resumably (Ctrl-C's way) before the step is killed."""
    demo = "bench/gpu_demo_run.py"
    args = ["--out", "{out}", "--timeout", "{timeout}", "--json", "{json}"]
    return [
        Step("gpu_demo_pilot", [demo, "--pilot", *args], 480, 240, DEMO_NEEDS),
        Step("gpu_demo", [demo, *args], 600, 300, DEMO_NEEDS),
    ]


# Issue 51's flagship, config.wmt14_en_fr.yaml's enfr_60L12L_admin: its recipe trains 1,280,000 target
# tokens per update, as Transformer-Clinic's 60L script shapes it, 5,000 x 16 micro-batches on each of 16
# GPUs; `plan --gpu-memory-gb 141` gives each 141 GB card 40,000 x 2 (tests/bench checks both against
# the plan). One GPU's share of the update is what the steps time.
FLAGSHIP = "enfr_60L12L_admin"
CARD_TOKENS, CARD_UPDATE_FREQ = 40000, 2
AUTHORS_TOKENS, AUTHORS_UPDATE_FREQ = 5000, 16


def card_steps() -> list[Step]:
    """Issue 51's targets: 60L-12L Admin at the card's shape (MFU; bf16, fp16, CUDA graphs), the same
    job beside fairseq as the authors shaped it, Big 6L-6L fp16, back-translation sampling with the Big
    reverse model beside fairseq, then the rate table with this run's results and the plan's estimate
    for config.wmt14_en_fr.yaml on 80 and 141 GB cards."""
    tt, cmp = "bench/train_throughput.py", "bench/compare.py"
    deep = [*LOOP, *BASE, "--encoder-layers", "60", "--decoder-layers", "12", "--residual", "admin",
            "--max-tokens", str(CARD_TOKENS), "--update-freq", str(CARD_UPDATE_FREQ), "--lengths", "20", "44",
            "--updates", "10", "--warmup", "4", "--json", "{json}"]  # fmt: skip
    fp16 = ["--amp", "fp16"]  # autocast fp16 with torch's GradScaler (argparse keeps the last --amp)
    recipe = ["--amp", "fairseq_fp16"]  # the En-Fr recipe's precision: fairseq's --fp16
    graphs = ["--compile", "--compile-mode", "reduce-overhead", "--pad-to-multiple", "8", "--warmup", "8"]
    # one GPU's share of the update both ways: fairseq as the authors split it, ours as the plan shapes
    # it, in the recipe's fp16 semantics with --deferred-stats (the same arithmetic, one host read fewer)
    authors = [cmp, *COMPARE, "--preset", "base", "--encoder-layers", "60", "--decoder-layers", "12",
               "--max-tokens", str(AUTHORS_TOKENS * AUTHORS_UPDATE_FREQ),
               "--fairseq-update-freq", str(AUTHORS_UPDATE_FREQ), "--deepnmt-update-freq", str(CARD_UPDATE_FREQ),
               "--deepnmt-train-args=--amp fairseq_fp16 --deferred-stats",  # "=": a value starting "--"
               "--updates", "10", "--warmup", "4", "--no-decode", "--json", "{json}"]  # fmt: skip
    big16 = [
        *LOOP,
        *BIG,
        *fp16,
        "--max-tokens",
        "16384",
        "--updates",
        "20",
        "--warmup",
        "8",
        "--json",
        "{json}",
    ]
    sampling = [cmp, *COMPARE, "--preset", "big", "--max-tokens", "4096", "--updates", "1", "--warmup", "1",
                "--decode-sentences", "2000", "--modes", "sample", "--json", "{json}"]  # fmt: skip
    plan = ["-m", "pipeline_lib", "plan", "--experiments-only", "--configfile", "config.wmt14_en_fr.yaml"]
    deferred, compiled = ["--deferred-stats"], ["--compile", "--pad-to-multiple", "8", "--warmup", "8"]
    return [
        # the recipe's precision first, plain and with each lever: the targets are about the best of them
        Step("enfr_60L12L_admin_card_bf16", [tt, *deep], 180, 45),
        Step("enfr_60L12L_admin_card_fairseq_fp16", [tt, *deep, *recipe], 180, 45),
        Step("enfr_60L12L_admin_card_fairseq_fp16_deferred", [tt, *deep, *recipe, *deferred], 180, 45),
        # inductor's fused kernels: at d=512 the norms, dropouts and residual sums are a large share
        Step(
            "enfr_60L12L_admin_card_fairseq_fp16_deferred_compile",
            [tt, *deep, *recipe, *deferred, *compiled],
            300,
            120,
        ),
        Step("compare_60L12L_authors_shape", authors, 420, 200),
        Step("big_fp16", [tt, *big16], 90, 15),
        Step("big_fp16_deferred", [tt, *big16, *deferred], 90, 15),
        Step("big_fp16_deferred_compile", [tt, *big16, *deferred, *compiled], 180, 60),
        # autocast fp16 with torch's GradScaler, and the launch-bound lever (CUDA graphs)
        Step("enfr_60L12L_admin_card_fp16", [tt, *deep, *fp16], 180, 45),
        Step("enfr_60L12L_admin_card_fp16_deferred", [tt, *deep, *fp16, *deferred], 180, 45),
        Step("enfr_60L12L_admin_card_graphs", [tt, *deep, *graphs], 300, 120),
        Step("bt_sampling_big", sampling, 300, 90),
        # the rate table (bench/gpu_rates.py) with this run's results ahead of bench/results, then the plan
        Step("gpu_rates", ["bench/gpu_rates.py", "--also", "{out}"], 60, 2),
        Step("plan_enfr_80GB", [*plan, "--gpu-memory-gb", "80"], 60, 2, PLAN_NEEDS),
        Step("plan_enfr_141GB", [*plan, "--gpu-memory-gb", "141"], 60, 2, PLAN_NEEDS),
    ]


def cpu_smoke(step: Step) -> Step:
    """The same step, tiny and on the CPU: checks the plumbing (flags, result files) without a GPU. The
    precision modes a CPU has stay (bf16, fairseq_fp16); autocast fp16 becomes bf16."""
    argv = ["cpu" if a == "cuda" else a for a in step.argv]
    swaps = {"--precision": "fp32", "--max-tokens": "512", "--updates": "3", "--warmup": "2",
             "--encoder-layers": "3", "--decoder-layers": "2", "--decode-sentences": "20", "--words": "300",
             "--vocab": "300", "--d-model": "64", "--ffn": "128", "--heads": "2", "--threads": "2",
             "--compile-mode": "default"}  # fmt: skip
    for i, a in enumerate(argv[:-1]):
        if a in swaps:
            argv[i + 1] = swaps[a]
        elif a == "--amp" and argv[i + 1] == "fp16":  # autocast fp16 is CUDA only
            argv[i + 1] = "bf16"
    argv = [a for a in argv if a != "--no-cudnn-attention"]
    # a CPU run of ours spreads micro-batches over threads, which fairseq_fp16 does not take
    argv = [
        "--deepnmt-train-args=--deferred-stats" if a.startswith("--deepnmt-train-args=") else a for a in argv
    ]
    if argv[0] in ("bench/fp16_numerics.py", "bench/gpu_demo_run.py"):
        argv.append("--cpu-smoke")
    if argv[0] == "bench/gpu_rates.py":  # CPU rows never enter the table: check it, write nothing
        argv.append("--check")
    if "--preset" in argv:
        argv[argv.index("--preset") + 1] = "small"
    return Step(step.name, argv, step.timeout, 0, step.needs)


def card_name() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def datasheet_peak(card: str) -> float | None:
    for name, tflops in DENSE_BF16_TFLOPS.items():
        if name in card:
            return tflops * 1e3
    return None


def pytest_counts(output: str) -> dict:
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", output)}
    return counts


def run_step(step: Step, work: Path, log, remaining: float, out: Path) -> dict:  # noqa: ANN001
    result_file = work / f"{step.name}.json"
    result_file.unlink(missing_ok=True)
    timeout = max(1.0, min(step.timeout, remaining))
    fill = {
        "{json}": str(result_file),
        "{out}": str(out.resolve()),
        "{timeout}": f"{max(1.0, timeout - 100):.0f}",
    }
    argv = [sys.executable, *[fill.get(a, a) for a in step.argv]]
    record: dict = {"argv": " ".join(["python", *argv[1:]]), "timeout_s": timeout}
    log.write(f"\n===== {step.name}: {record['argv']}\n")
    log.flush()
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, cwd=ROOT, env=child_env(step.env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=timeout,
        )  # fmt: skip
        output, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = None
    record["wall_s"] = time.perf_counter() - started
    log.write(output)
    log.flush()
    record["rc"] = rc
    record["status"] = "timeout" if rc is None else ("ok" if rc == 0 else "failed")
    record["output_tail"] = output[-1500:]
    if result_file.is_file():
        record["result"] = json.loads(result_file.read_text())
    if "pytest" in step.argv:
        record["result"] = pytest_counts(output.splitlines()[-1] if output.strip() else "")
    if step.name.startswith("plan_"):  # the plan's per-experiment table, GPU-hours beside the cap
        record["result"] = {"table": output}
    return record


def summary(report: dict) -> str:
    """A markdown table of the training steps; the compare steps print their own tables in the log."""
    peak = report.get("datasheet_dense_bf16_gflops")
    lines = ["| step | model | tok/s (aggregate) | MFU vs matmul | MFU vs datasheet | peak MiB | plan GB |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name, rec in report["steps"].items():
        r = rec.get("result") or {}
        if "tokens_per_s_aggregate" not in r:
            continue
        vs_sheet = f"{r['gflops'] / peak:.1%}" if peak and "gflops" in r else "-"
        vs_mm = f"{r['mfu_vs_matmul_peak']:.1%}" if "mfu_vs_matmul_peak" in r else "-"
        lines.append(
            f"| {name} | {r['model']} {'+'.join(r['levers']) or 'plain'} | {r['tokens_per_s_aggregate']:,.0f} | "
            f"{vs_mm} | {vs_sheet} | {r['peak_memory_mib']:,.0f} | {r['plan_estimate_gb']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the JSON and the log")
    p.add_argument(
        "--deadline", type=float, default=560, help="seconds: no step starts that cannot end by then"
    )
    p.add_argument("--steps", nargs="+", default=None, help="only these steps (default: all)")
    p.add_argument(
        "--previous", type=Path, default=None, help="an earlier run's JSON: keep its finished steps"
    )
    p.add_argument("--cpu-smoke", action="store_true", help="every step tiny and on the CPU (plumbing check)")
    args = p.parse_args()
    started, t0 = dt.datetime.now(), time.perf_counter()
    card = card_name()
    slug = re.sub(r"[^a-z0-9]+", "-", card.lower()).strip("-")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"gpu-{slug}-evidence.json"
    report: dict = {
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "card": card,
        "datasheet_dense_bf16_gflops": datasheet_peak(card),
        "steps": {},
    }
    if args.previous:
        done = json.loads(args.previous.read_text())["steps"]
        report["steps"].update({k: v for k, v in done.items() if v.get("status") == "ok"})
    work = Path(tempfile.mkdtemp(prefix="gpu-evidence-"))  # each step's own JSON, folded into the report
    chosen = [s for s in steps() if args.steps is None or s.name in args.steps]
    with open(args.out / "gpu-evidence.log", "a", encoding="utf-8") as log:
        for step in chosen:
            if step.name in report["steps"]:
                continue
            if args.cpu_smoke:
                step = cpu_smoke(step)
            remaining = args.deadline - (time.perf_counter() - t0)
            if gone := missing(step):
                report["steps"][step.name] = {"status": "skipped", "why": f"missing {', '.join(gone)}"}
                print(f"[{step.name}] skipped: missing {', '.join(gone)}", flush=True)
                continue
            if remaining < step.expected:
                report["steps"][step.name] = {"status": "skipped", "why": f"{remaining:.0f}s left"}
                print(f"[{step.name}] skipped: {remaining:.0f}s left", flush=True)
                continue
            rec = run_step(step, work, log, remaining, args.out)
            report["steps"][step.name] = rec
            print(f"[{step.name}] {rec['status']} in {rec['wall_s']:.0f}s", flush=True)
            write_json(out, report)
    report["wall_s"] = time.perf_counter() - t0
    write_json(out, report)
    print(summary(report))
    print(f"wrote {out}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
