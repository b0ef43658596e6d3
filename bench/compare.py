"""Side-by-side training and decoding speed: deepnmt vs fairseq, OpenNMT-py and Sockeye (issue 8).

    bench/peers/install.sh fairseq; bench/peers/install.sh opennmt; bench/peers/install.sh sockeye
    .venv/bin/python bench/compare.py [--quick] [--toolkits fairseq deepnmt ...] [--threads 2]
        [--updates 40] [--warmup 5] [--decode-sentences 500] [--rounds 1] [--json bench/results/compare-DATE.json]

One synthetic parallel corpus (fixed seed: a Zipfian vocabulary of a few thousand "words", source
lengths 10..40 tokens, log-normal around 22 as in real MT; the target is a fixed word-for-word mapping
of the source with local swaps, drops and insertions, so it is learnable). Then, one toolkit at a time
(each in its own venv under ``$DEEPNMT_BENCH_CACHE/venvs``; ours from this project's .venv), with the
toolkit's own preprocessing, the same model (bench/peers/toolkits.py lists every flag) is trained for
a fixed number of updates on ``--threads`` threads (OMP/MKL_NUM_THREADS and torch.set_num_threads).

Measured per toolkit:

* training target tokens/s: the median over the timed updates (the first ``--warmup`` updates are
  excluded) of real target tokens (</s> included, padding excluded) / time between two optimizer steps,
  both taken by bench/peers/shim.py in the same way for every toolkit; the toolkits' own logs are only
  a cross-check. Also the training process' wall time and the peak RSS of its whole process tree
  (psutil, polled every 50 ms);
* achieved GFLOP/s = tokens/s x training FLOPs per target token (computed from the model shape and the
  corpus' real lengths: 6 x matmul parameters per token + 3 x attention score/context FLOPs), and MFU
  against the fp32 matmul peak of torch on the same threads, measured in the same run;
* beam-4 decoding of the test set: sentences/s and tokens/s (best hypothesis, </s> included) from the
  toolkit's own timer around its search (model loading excluded), in a ``fixed`` mode (every output
  exactly 30 tokens: the speed of the search itself) and a ``natural`` one (the model decides; with the
  few updates of a benchmark the lengths are arbitrary and differ per toolkit: compare tokens/s there).

On a GPU (``--device cuda --precision fp16|bf16 --preset base [--encoder-layers 24]``, fairseq and deepnmt
only) MFU is against the GPU's matmul peak in that precision, and the table adds each toolkit's peak
GPU memory (torch.cuda.max_memory_allocated, read at every optimizer step by the shim).

Prints one table with every number as value and ratio to fairseq, and writes JSON. The machine's other
load makes single runs noisy (up to ~30%): compare toolkits within one run only. ``--rounds N`` trains
every toolkit N times, in reverse order every other round (decoding runs once, after the first): the
table then reports each toolkit's median round and its highest peak memory, and a second table lists
every round with ours against the fastest peer of that round.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import psutil
import torch

from pipeline_lib.atomic import write_json

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
sys.path.insert(0, str(PEERS))
from toolkits import (  # noqa: E402
    BEAM,
    DECODE_BATCH,
    FIXED_LEN,
    PRESETS,
    SAMPLING_MODES,
    TOOLKITS,
    Command,
    Setup,
    Shape,
    Toolkit,
)

MAX_TOKENS = 4096
ORDER = ("fairseq", "opennmt", "sockeye", "deepnmt")


# ---------------------------------------------------------------- data


def make_corpus(out: Path, n_train: int, n_valid: int, n_test: int, words: int, seed: int) -> dict:
    """Whitespace-tokenized train/valid/test .src/.tgt files; returns corpus statistics."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < words:
        w = "".join(rng.choice(letters, size=int(rng.integers(2, 10))))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    zipf = 1.0 / np.arange(1, words + 1)
    zipf /= zipf.sum()
    cdf = np.cumsum(zipf)

    def draw(size: int) -> np.ndarray:  # rng.choice(p=...) rebuilds the CDF per call: slow for 32k words
        return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), words - 1)

    mapping = rng.permutation(words)  # source word i translates to target word mapping[i]
    out.mkdir(parents=True, exist_ok=True)
    stats: dict = {}
    for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        src_lines, tgt_lines = [], []
        lengths = np.clip(np.rint(rng.lognormal(math.log(22), 0.35, size=n)), 10, 40).astype(int)
        for length in lengths:
            src = draw(length)
            tgt = list(mapping[src])
            for i in range(len(tgt) - 1):  # local reordering
                if rng.random() < 0.1:
                    tgt[i], tgt[i + 1] = tgt[i + 1], tgt[i]
            tgt = [t for t in tgt if rng.random() >= 0.05]  # drops ...
            for _ in range(rng.binomial(len(src), 0.05)):  # ... and insertions
                tgt.insert(int(rng.integers(0, len(tgt) + 1)), int(draw(1)[0]))
            src_lines.append(" ".join(vocab[i] for i in src))
            tgt_lines.append(" ".join(vocab[i] for i in tgt))
        (out / f"{split}.src").write_text("\n".join(src_lines) + "\n", encoding="utf-8")
        (out / f"{split}.tgt").write_text("\n".join(tgt_lines) + "\n", encoding="utf-8")
        stats[split] = {
            "sentences": n,
            "src_lengths": [len(s.split()) for s in src_lines],
            "tgt_lengths": [len(t.split()) for t in tgt_lines],
        }
    types = {
        w for split in ("train",) for f in ("src", "tgt") for w in (out / f"{split}.{f}").read_text().split()
    }
    stats["joint_types"] = len(types)
    return stats


# ---------------------------------------------------------------- FLOPs and peak


def train_flops_per_target_token(src_lens: list[int], tgt_lens: list[int], vocab: int, shape: Shape) -> dict:
    """Training FLOPs per real target token for the benchmark model, from the corpus' real lengths.

    Matmuls: 2 FLOPs per multiply-add forward, x3 for forward + backward (6 x parameters x tokens).
      per source token: encoder layers (QKVO 4d^2 + FFN 2df) + decoder cross-attention K,V (2d^2) per layer;
      per target token: decoder layers (self QKVO 4d^2 + cross Q,O 2d^2 + FFN 2df) + output projection dV.
    Attention scores and context (QK^T, AV): 4d FLOPs per (query, key) pair forward, x3 for training;
      encoder S^2, decoder self T^2 (the full masked square, as every toolkit computes it), cross T*S.
    Lengths include </s> (source ids + </s>; decoder input <s> + ids, as long as the target).
    Embedding lookups, layer norms, softmax and the loss are left out (the usual convention).
    """
    d, f, enc, dec = shape.d_model, shape.ffn, shape.encoder_layers, shape.decoder_layers
    src = np.asarray(src_lens, dtype=np.float64) + 1
    tgt = np.asarray(tgt_lens, dtype=np.float64) + 1
    per_src = enc * (4 * d * d + 2 * d * f) + dec * 2 * d * d
    per_tgt = dec * (6 * d * d + 2 * d * f) + d * vocab
    matmul = 6 * (per_src * src.sum() + per_tgt * tgt.sum())
    pairs = enc * (src**2).sum() + dec * ((tgt**2).sum() + (tgt * src).sum())
    attention = 3 * 4 * d * pairs
    total_tgt = tgt.sum()
    return {
        "flops_per_target_token": (matmul + attention) / total_tgt,
        "matmul_part": matmul / total_tgt,
        "attention_part": attention / total_tgt,
        "params_per_source_token": per_src,
        "params_per_target_token": per_tgt,
        "mean_source_len": float(src.mean()),
        "mean_target_len": float(tgt.mean()),
        "vocab": vocab,
        "formula": "6*(N_src*S + N_tgt*T) + 12*d*(L_enc*S^2 + L_dec*(T^2 + T*S)), per real target token",
    }


def matmul_peak(threads: int, device: str = "cpu", precision: str = "fp32", reps: int = 5) -> float:
    """Best GFLOP/s of an n x n @ n x n torch.mm: fp32 on `threads` CPU threads (n = 4096), or on the GPU
    in the training precision (n = 8192; fp32 without TF32, since neither toolkit enables it)."""
    if device == "cuda":
        return _gpu_matmul_peak(precision, reps)
    n = 4096
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)  # warm-up
        best = math.inf
        for _ in range(reps):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
        return 2 * n**3 / best / 1e9
    finally:
        torch.set_num_threads(old)


def _gpu_matmul_peak(precision: str, reps: int, n: int = 8192) -> float:
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.mm(a, b)  # warm-up: cuBLAS handle, heuristics, clocks
    best = math.inf
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            torch.mm(a, b)
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1000 / 10)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n**3 / best / 1e9


# ---------------------------------------------------------------- running a toolkit


@dataclass
class Proc:
    rc: int
    wall_s: float
    peak_rss_mib: float
    log: str
    log_path: str


def venv_python(name: str, cache: Path) -> Path:
    if name == "deepnmt":
        return Path(sys.executable)
    return cache / "venvs" / name / "bin" / "python"


def installed(name: str, cache: Path) -> str | None:
    """None if usable, else why not."""
    if name == "deepnmt":
        return None
    marker = cache / "venvs" / name / ".deepnmt-bench-installed"
    if not marker.is_file():
        return f"not installed: run bench/peers/install_{name}.sh (expected {marker})"
    return None


def run_cmd(python: Path, toolkit: str, cmd: Command, threads: int, log_path: Path, timeout: float,
            record: Path | None = None, gpu: bool = False, no_cudnn_attention: bool = False) -> Proc:  # fmt: skip
    argv = [str(python), str(PEERS / "shim.py"), "--toolkit", toolkit, "--threads", str(threads)]
    if no_cudnn_attention:
        argv.append("--no-cudnn-attention")
    if record is not None:
        argv += ["--record", str(record)]
    if cmd.min_len:
        argv += ["--min-len", str(cmd.min_len)]
    argv += ["--", cmd.module, *cmd.args]
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
        TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false",
    )  # fmt: skip
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.pop("PYTHONPATH", None)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    peak = 0.0
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(repr(a) if (" " in a or not a) else a for a in argv) + "\n")
        log.flush()
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=log_path.parent)
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            rss = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        rss += p.memory_info().rss
            except psutil.Error:
                pass
            peak = max(peak, rss / 2**20)
            if time.perf_counter() - start > timeout:
                proc.kill()
                proc.wait()
                log.write(f"\n[compare.py] killed after {timeout:.0f}s\n")
                break
            time.sleep(0.05)
        wall = time.perf_counter() - start
    return Proc(
        proc.returncode, wall, peak, log_path.read_text(encoding="utf-8", errors="replace"), str(log_path)
    )


class StepFailed(RuntimeError):
    pass


def _check(proc: Proc, what: str) -> None:
    if proc.rc != 0:
        tail = "\n".join(proc.log.strip().splitlines()[-15:])
        raise StepFailed(f"{what} failed (exit {proc.rc}); log {proc.log_path}:\n{tail}")


# ---------------------------------------------------------------- measurements


def train_metrics(record: Path, warmup: int) -> dict:
    data = json.loads(record.read_text(encoding="utf-8"))
    steps = data["steps"]
    durations = [steps[i][0] - steps[i - 1][0] for i in range(1, len(steps))]
    tokens = [steps[i][1] for i in range(1, len(steps))]
    # update i (1-based) lasts from step i-1 to step i; updates 1..warmup are not timed
    timed = [(t, d) for i, (t, d) in enumerate(zip(tokens, durations, strict=False), start=2) if i > warmup]
    if not timed:
        raise StepFailed(f"{record}: only {len(steps)} optimizer steps recorded, none after the warm-up")
    rates = [t / d for t, d in timed]
    return {
        "updates_recorded": len(steps),
        "timed_updates": len(timed),
        "tokens_per_s_median": statistics.median(rates),
        "tokens_per_s_min": min(rates),
        "tokens_per_s_max": max(rates),
        "tokens_per_s_aggregate": sum(t for t, _ in timed) / sum(d for _, d in timed),
        "target_tokens_per_update": statistics.mean(t for t, _ in timed),
        "seconds_per_update_median": statistics.median(d for _, d in timed),
        "first_update_s": steps[0][0] - data["start"],  # startup + data loading + first update
        "gpu_max_allocated_mib": data.get("cuda_max_allocated_mib"),
    }


def own_log_rate(tk: Toolkit, s: Setup, log: str, warmup: int) -> float | None:
    """The toolkit's own tokens/s log, as a cross-check of the shim's timing (fairseq and ours)."""
    rates = []
    if tk.name == "deepnmt":
        path = s.work / "ckpt" / "train_log.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                if r.get("kind") == "train" and r.get("update", 0) > warmup:
                    rates.append(float(r["tokens_per_s"]))
    elif tk.name == "fairseq":
        for line in log.splitlines():
            brace = line.find("{")
            if brace < 0 or "train_inner" not in line[:brace]:  # per-update records, not the epoch summary
                continue
            try:
                r = json.loads(line[brace:])
            except json.JSONDecodeError:
                continue
            if "num_updates" in r and "wps" in r and int(r["num_updates"]) > warmup:
                rates.append(float(r["wps"]))
    return statistics.median(rates) if rates else None


def decode_metrics(tk: Toolkit, s: Setup, proc: Proc, out: Path, n: int, mode: str) -> dict:
    hyps = tk.hypotheses(out, proc.log)
    if len(hyps) != n:
        raise StepFailed(
            f"{tk.name} {mode} decoding: {len(hyps)} hypotheses for {n} sentences ({proc.log_path})"
        )
    lengths = [len(h.split()) for h in hyps]
    timing = tk.decode_timing(proc.log, n)
    if timing is None:
        raise StepFailed(f"{tk.name} {mode} decoding: no timing line found in {proc.log_path}")
    tokens = sum(lengths) + n  # + </s>
    return {
        "sentences": n,
        "seconds": timing.seconds,
        "timer": timing.source,
        "sentences_per_s": n / timing.seconds,
        "tokens_per_s": tokens / timing.seconds,
        "process_wall_s": proc.wall_s,
        "peak_rss_mib": proc.peak_rss_mib,
        "mean_len": statistics.mean(lengths),
        "min_len": min(lengths),
        "max_len": max(lengths),
        "length_options": tk.decode_length_options(mode, s),
    }


@dataclass
class Result:
    toolkit: str
    label: str
    layer_norm: str
    note: str = ""
    status: str = "ok"
    error: str = ""
    preprocess_wall_s: float | None = None
    train: dict = field(default_factory=dict)
    decode: dict = field(default_factory=dict)


def bench_toolkit(tk: Toolkit, s: Setup, args: argparse.Namespace, cache: Path, n_test: int) -> Result:
    res = Result(tk.name, tk.label, tk.layer_norm, tk.note)
    why = installed(tk.name, cache)
    if why is None and s.device == "cuda" and s.precision not in tk.gpu_precisions:
        why = f"{tk.name} runs {', '.join(tk.gpu_precisions) or 'nothing'} on a GPU here, not {s.precision}"
    if why is not None:
        res.status, res.error = "skipped", why
        return res
    run = toolkit_runner(tk, s, args, cache)
    if s.work.exists():
        shutil.rmtree(s.work)
    s.work.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        for i, cmd in enumerate(tk.preprocess(s)):
            _check(run(cmd, f"preprocess{i}.log"), "preprocessing")
        res.preprocess_wall_s = time.perf_counter() - t0
        print(
            f"[{tk.name}] preprocessed in {res.preprocess_wall_s:.1f}s; training {s.updates} updates",
            flush=True,
        )

        res.train = train_once(tk, s, args, res, run, "")
        res.train["rounds"] = [round_summary(res.train)]
        for mode in args.modes:
            if mode in SAMPLING_MODES and tk.name not in ("fairseq", "deepnmt"):
                continue  # the sampling flags are fairseq's and ours
            out = s.work / f"decode-{mode}.txt"
            proc = run(tk.decode(s, mode, out), f"decode-{mode}.log")
            _check(proc, f"{mode} decoding")
            res.decode[mode] = decode_metrics(tk, s, proc, out, n_test, mode)
            d = res.decode[mode]
            print(
                f"[{tk.name}] decode {mode}: {d['sentences_per_s']:.1f} sent/s, {d['tokens_per_s']:.0f} tok/s, "
                f"len {d['min_len']}-{d['max_len']} (mean {d['mean_len']:.1f})",
                flush=True,
            )
    except StepFailed as e:
        res.status, res.error = "failed", str(e)
        print(f"[{tk.name}] FAILED: {e}", file=sys.stderr, flush=True)
    return res


def toolkit_runner(tk: Toolkit, s: Setup, args: argparse.Namespace, cache: Path) -> Callable[..., Proc]:
    """run(command, log file name, record=None) in the toolkit's venv, with this run's threads, timeout
    and device flags; logs go to the toolkit's work dir."""
    py = venv_python(tk.name, cache)
    gpu = s.device == "cuda"

    def run(cmd: Command, log_name: str, record: Path | None = None) -> Proc:
        return run_cmd(
            py, tk.name, cmd, s.threads, s.work / "logs" / log_name, args.timeout, record=record, gpu=gpu,
            no_cudnn_attention=args.no_cudnn_attention,
        )  # fmt: skip

    return run


def train_once(
    tk: Toolkit, s: Setup, args: argparse.Namespace, res: Result, run: Callable[..., Proc], tag: str
) -> dict:
    """One training run from scratch; its metrics. ``tag`` names the log and step record of a repeat."""
    gpu = s.device == "cuda"
    record = s.work / f"steps{tag}.json"
    proc = run(tk.train(s), f"train{tag}.log", record=record)
    _check(proc, "training")
    metrics = train_metrics(record, args.warmup)
    metrics.update(wall_s=proc.wall_s, peak_rss_mib=proc.peak_rss_mib)
    metrics["own_log_tokens_per_s_median"] = own_log_rate(tk, s, proc.log, args.warmup)
    if metrics["updates_recorded"] != s.updates:
        res.note += f"; {metrics['updates_recorded']} optimizer steps recorded for {s.updates} updates"
    print(
        f"[{tk.name}] train{tag.replace('-', ' ')} {metrics['tokens_per_s_median']:.0f} tok/s (median of "
        f"{metrics['timed_updates']}), wall {proc.wall_s:.0f}s, peak RSS {proc.peak_rss_mib:.0f} MiB"
        + (f", peak GPU memory {metrics['gpu_max_allocated_mib']:,.0f} MiB" if gpu else ""),
        flush=True,
    )
    return metrics


def round_summary(metrics: dict) -> dict:
    keys = (
        "tokens_per_s_median",
        "seconds_per_update_median",
        "wall_s",
        "peak_rss_mib",
        "gpu_max_allocated_mib",
    )
    return {k: metrics[k] for k in keys}


def train_again(
    tk: Toolkit, s: Setup, args: argparse.Namespace, cache: Path, res: Result, number: int
) -> None:
    """--rounds: train once more from scratch (same data, same command) and add the round to res.train."""
    if res.status != "ok" or len(res.train["rounds"]) != number - 1:  # it failed before
        return
    for path in tk.train_outputs(s):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    try:
        metrics = train_once(tk, s, args, res, toolkit_runner(tk, s, args, cache), f"-round{number}")
    except StepFailed as e:  # the rounds already measured stand; the failure is reported with them
        res.note += f"; training round {number} failed ({str(e).splitlines()[0]})"
        print(f"[{tk.name}] round {number} FAILED: {e}", file=sys.stderr, flush=True)
        return
    res.train["rounds"].append(round_summary(metrics))


def combine_rounds(res: Result) -> None:
    """The headline training numbers: the median over rounds of each round's median tokens/s, the
    highest peak memory of any round."""
    rounds = res.train["rounds"]
    res.train["tokens_per_s"] = statistics.median(r["tokens_per_s_median"] for r in rounds)
    res.train["peak_rss_mib"] = max(r["peak_rss_mib"] for r in rounds)
    res.train["wall_s"] = statistics.median(r["wall_s"] for r in rounds)
    gpu = [r["gpu_max_allocated_mib"] for r in rounds if r["gpu_max_allocated_mib"] is not None]
    res.train["gpu_max_allocated_mib"] = max(gpu) if gpu else None


def rounds_table(results: list[Result], orders: list[list[str]]) -> tuple[str, list[float]]:
    """Per-round training tokens/s of every toolkit, and ours against the fastest peer of each round."""
    ok = [r for r in results if r.status == "ok"]
    ours = next((r for r in ok if r.toolkit == "deepnmt"), None)
    peers = [r for r in ok if r.toolkit != "deepnmt"]
    header = (
        ["round", "order"] + [r.toolkit for r in ok] + (["deepnmt / fastest peer"] if ours and peers else [])
    )
    rows, ratios = [], []
    for i, order in enumerate(orders):
        rates = {
            r.toolkit: r.train["rounds"][i]["tokens_per_s_median"] for r in ok if len(r.train["rounds"]) > i
        }
        row = [str(i + 1), ",".join(order)] + [
            f"{rates[r.toolkit]:,.0f}" if r.toolkit in rates else "-" for r in ok
        ]
        if ours and peers:
            fastest = max((rates[p.toolkit] for p in peers if p.toolkit in rates), default=None)
            if fastest and "deepnmt" in rates:
                ratios.append(rates["deepnmt"] / fastest)
                row.append(f"{ratios[-1]:.2f}x")
            else:
                row.append("-")
        rows.append(row)
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [
        " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
        "-+-".join("-" * w for w in widths),
    ]
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines), ratios


# ---------------------------------------------------------------- report


def _cell(value: float | None, base: float | None, fmt: str) -> str:
    if value is None:
        return "-"
    text = format(value, fmt)
    if base:
        text += f" ({value / base:.2f}x)"
    return text


def table(
    results: list[Result], peak: float, flops: float, modes: list[str], peak_label: str, gpu: bool
) -> str:
    base = next((r for r in results if r.toolkit == "fairseq" and r.status == "ok"), None)

    def get(r: Result | None, *path: str) -> float | None:
        cur: object = r
        for key in path:
            if cur is None:
                return None
            cur = cur.train if key == "train" else cur.decode if key == "decode" else cur.get(key)  # type: ignore[union-attr]
        return cur if isinstance(cur, (int, float)) else None

    cols = [
        ("LN", None, None),
        ("train tok/s", ("train", "tokens_per_s"), ",.0f"),
        ("tok/upd", ("train", "target_tokens_per_update"), ",.0f"),
        ("GFLOP/s", ("train", "gflops"), ".0f"),
        ("MFU", ("train", "mfu"), ".1%"),
        ("train wall s", ("train", "wall_s"), ".0f"),
        ("peak RSS MiB", ("train", "peak_rss_mib"), ",.0f"),
    ]
    if gpu:
        cols.append(("GPU MiB", ("train", "gpu_max_allocated_mib"), ",.0f"))
    for mode in modes:
        cols += [
            (f"{mode} sent/s", ("decode", mode, "sentences_per_s"), ".1f"),
            (f"{mode} tok/s", ("decode", mode, "tokens_per_s"), ",.0f"),
            (f"{mode} len", ("decode", mode, "mean_len"), ".1f"),
        ]
    header = ["toolkit"] + [c[0] for c in cols]
    rows = []
    for r in results:
        if r.status != "ok":
            rows.append([r.toolkit, r.layer_norm, f"{r.status}: {r.error.splitlines()[0][:90]}"])
            continue
        row = [r.toolkit, r.layer_norm]
        for name, path, fmt in cols[1:]:
            v = get(r, *path)
            b = get(base, *path) if name not in ("MFU",) and not name.endswith(" len") else None
            if name == "tok/upd":
                b = None
            row.append(_cell(v, b, fmt))
        rows.append(row)
    widths = [
        max([len(header[i])] + [len(row[i]) for row in rows if len(row) > i]) for i in range(len(header))
    ]
    lines = [
        " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)),
        "-+-".join("-" * w for w in widths),
    ]
    for row in rows:
        lines.append(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))
    lines.append(
        f"ratios (x) are against fairseq; MFU against the {peak_label} matmul peak {peak:,.0f} GFLOP/s measured in "
        f"this run; {flops / 1e6:.1f} MFLOP per target token (training)"
    )
    return "\n".join(lines)


def bt_cost_table(results: list[Result], modes: list[str], sentences: float, device: str) -> str:
    """Hours to back-translate ``sentences`` at each decoding mode's measured rate, per toolkit."""
    lines = [f"\nback-translation cost: {sentences / 1e6:.1f}M sentences at each rate, one {device} worker"]
    lines.append(f"{'mode':8} {'toolkit':10} {'sent/s':>8} {'tok/s':>8} {'hours':>10} {'vs fairseq':>10}")
    for mode in modes:
        base = next((r.decode[mode] for r in results if r.toolkit == "fairseq" and mode in r.decode), None)
        for r in results:
            d = r.decode.get(mode)
            if r.status != "ok" or d is None:
                continue
            ratio = f"{d['sentences_per_s'] / base['sentences_per_s']:.2f}x" if base else "-"
            hours = sentences / d["sentences_per_s"] / 3600
            lines.append(
                f"{mode:8} {r.toolkit:10} {d['sentences_per_s']:8.1f} {d['tokens_per_s']:8.0f} {hours:10,.0f} {ratio:>10}"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--toolkits", nargs="+", choices=ORDER, default=list(ORDER), help="run in this order")
    p.add_argument("--quick", action="store_true", help="3 warm-up + 10 timed updates, 200 decoded sentences")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--updates", type=int, default=None, help="timed updates (default 40; quick 10)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up updates (default 5; quick 3)")
    p.add_argument("--decode-sentences", type=int, default=None, help="default 500; quick 200")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="train every toolkit this many times (order reversed every other round); the table reports "
        "the median round, and a second table every round",
    )
    p.add_argument(
        "--modes",
        nargs="+",
        choices=["fixed", "natural", *SAMPLING_MODES],
        default=["fixed", "natural"],
        help="decoding: beam search at a fixed or natural length, or back-translation's sampling (fairseq, ours)",
    )
    p.add_argument("--no-decode", action="store_true", help="training only (no decoding modes)")
    p.add_argument(
        "--beam", type=int, default=BEAM, help=f"beam size of the beam-search modes (default {BEAM})"
    )
    p.add_argument(
        "--bt-sentences",
        type=float,
        default=21.8e6,
        help="back-translation cost: hours to decode this many sentences at each mode's rate (paper: 21.8M)",
    )
    p.add_argument("--words", type=int, default=4000, help="synthetic vocabulary size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work-dir", type=Path, default=None, help="default: a temporary directory, removed")
    p.add_argument("--json", type=Path, default=None, help="default bench/results/compare-<date>.json")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per toolkit command")
    g = p.add_argument_group("model and hardware (defaults: the CPU bar of issue 8)")
    g.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="small",
        help="small: d=256; base: d=512, 8 heads; big: d=1024, 16 heads",
    )
    g.add_argument("--encoder-layers", type=int, default=None, help="override the preset's 6")
    g.add_argument("--decoder-layers", type=int, default=None, help="override the preset's 6")
    g.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="target tokens per update")
    g.add_argument(
        "--fairseq-update-freq",
        type=int,
        default=1,
        help="fairseq accumulates this many micro-batches of max_tokens/N per update (the authors' V100 "
        "split of the same update); ours trains it as --deepnmt-update-freq batches (the card's shape)",
    )
    g.add_argument(
        "--deepnmt-update-freq",
        type=int,
        default=1,
        help="ours accumulates this many micro-batches of max_tokens/N per update (on a GPU): the shape "
        "`plan --gpu-memory-gb` gives the card",
    )
    g.add_argument(
        "--deepnmt-train-args",
        default="",
        help="more `train` flags for ours, appended (e.g. '--amp fairseq_fp16 --deferred-stats': the last "
        "--amp wins); results with any are not rows of bench/gpu_rates.py's table",
    )
    g.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: fairseq and deepnmt only")
    g.add_argument(
        "--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="bf16, fp16: GPU only"
    )
    g.add_argument(
        "--no-cudnn-attention",
        action="store_true",
        help="every toolkit: keep torch's SDPA off cuDNN attention (deepnmt does this itself on CUDA)",
    )
    g.add_argument(
        "--decode-batch", type=int, default=None, help="sentences per decoding batch (default 128)"
    )
    args = p.parse_args()
    if args.precision != "fp32" and args.device != "cuda":
        p.error(f"--precision {args.precision} needs --device cuda (the CPU bar is fp32)")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no GPU here")
    base = PRESETS[args.preset]
    args.shape = Shape(
        args.encoder_layers or base.encoder_layers, args.decoder_layers or base.decoder_layers,
        base.d_model, base.ffn, base.heads,
    )  # fmt: skip
    args.decode_batch = args.decode_batch or DECODE_BATCH
    args.updates = args.updates or (10 if args.quick else 40)
    args.warmup = args.warmup if args.warmup is not None else (3 if args.quick else 5)
    args.decode_sentences = args.decode_sentences or (200 if args.quick else 500)
    if args.no_decode:
        args.modes = []
    if args.beam < 1:
        p.error("--beam must be >= 1")
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if args.warmup < 1:
        p.error("--warmup must be >= 1 (the first update includes start-up)")
    return args


def main() -> None:
    args = parse_args()
    cache = Path(os.environ.get("DEEPNMT_BENCH_CACHE", Path.home() / ".cache" / "deepnmt-bench"))
    total_updates = args.warmup + args.updates
    # enough pairs that no toolkit reaches an epoch boundary (validation, reshuffling) while timed
    n_train = max(2000, int(total_updates * args.max_tokens / 23 * 1.5))
    work_root = args.work_dir or Path(tempfile.mkdtemp(prefix="deepnmt-compare-"))
    started = dt.datetime.now()
    load_before = os.getloadavg()
    print(
        f"compare: toolkits {' '.join(args.toolkits)}; {args.shape.describe()}, {args.max_tokens} tokens/update, "
        f"{args.device} {args.precision}; {args.threads} threads; {args.warmup} warm-up + {args.updates} timed "
        f"updates; {args.decode_sentences} decoded sentences; work dir {work_root}",
        flush=True,
    )
    raw = work_root / "raw"
    corpus = make_corpus(raw, n_train, 200, args.decode_sentences, args.words, args.seed)
    vocab = corpus["joint_types"] + 4  # + <pad> <s> </s> <unk>
    flops = train_flops_per_target_token(
        corpus["train"]["src_lengths"], corpus["train"]["tgt_lengths"], vocab, args.shape
    )
    fpt = flops["flops_per_target_token"]
    print(
        f"corpus: {n_train} train pairs, {corpus['joint_types']} joint word types, mean length "
        f"src {flops['mean_source_len']:.1f} tgt {flops['mean_target_len']:.1f} (</s> incl.); training "
        f"{fpt / 1e6:.1f} MFLOP/target token (matmul {flops['matmul_part'] / 1e6:.1f} + attention "
        f"{flops['attention_part'] / 1e6:.1f}; {flops['formula']})",
        flush=True,
    )
    gpu = args.device == "cuda"
    peak_label = f"GPU {args.precision} (8192^3)" if gpu else f"fp32 (4096^3, {args.threads} threads)"
    if gpu:
        print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    peaks = [matmul_peak(args.threads, args.device, args.precision)]
    print(f"{peak_label} matmul peak: {peaks[0]:,.0f} GFLOP/s", flush=True)

    s_common = dict(
        raw=raw, updates=total_updates, max_tokens=args.max_tokens, threads=args.threads,
        max_src_len=max(corpus["test"]["src_lengths"]), shape=args.shape, device=args.device,
        precision=args.precision, decode_batch=args.decode_batch, beam=args.beam,
    )  # fmt: skip
    names = list(dict.fromkeys(args.toolkits))  # in the order given: alternate it to expose drift in the load
    setups = {
        name: Setup(
            work=work_root / name,
            update_freq={"fairseq": args.fairseq_update_freq, "deepnmt": args.deepnmt_update_freq}.get(
                name, 1
            ),
            extra_train=tuple(shlex.split(args.deepnmt_train_args)) if name == "deepnmt" else (),
            **s_common,
        )
        for name in names
    }
    results = [
        bench_toolkit(TOOLKITS[name], setups[name], args, cache, args.decode_sentences) for name in names
    ]
    # --rounds: training again, in reverse order every other round, so that a slow spell of the machine
    # does not fall on one toolkit only
    orders = [names]
    for number in range(2, args.rounds + 1):
        orders.append(names[::-1] if number % 2 == 0 else names)
        print(f"round {number} of {args.rounds}: training {' '.join(orders[-1])}", flush=True)
        for name in orders[-1]:
            train_again(TOOLKITS[name], setups[name], args, cache, results[names.index(name)], number)
    peaks.append(matmul_peak(args.threads, args.device, args.precision))
    peak = max(peaks)
    for r in results:
        if r.status == "ok":
            combine_rounds(r)
            r.train["gflops"] = r.train["tokens_per_s"] * fpt / 1e9
            r.train["mfu"] = r.train["gflops"] / peak
    print(f"{peak_label} matmul peak at the end: {peaks[1]:,.0f} GFLOP/s (using the best, {peak:,.0f})")
    load_after = os.getloadavg()
    print()
    print(table(results, peak, fpt, args.modes, peak_label, gpu))
    ratios: list[float] = []
    if args.rounds > 1:
        text, ratios = rounds_table(results, orders)
        print(f"\ntraining target tok/s per round (the table above: median over the {args.rounds} rounds):")
        print(text)
        if ratios:
            print(
                f"deepnmt / fastest peer: median {statistics.median(ratios):.2f}x, "
                f"lowest {min(ratios):.2f}x, highest {max(ratios):.2f}x"
            )
    print(bt_cost_table(results, args.modes, args.bt_sentences, args.device))
    for r in results:
        if r.note:
            print(f"note {r.toolkit}: {r.note.lstrip('; ')}")
    for mode in args.modes:
        for r in results:
            if r.status == "ok" and mode in r.decode:
                print(f"{mode} length options {r.toolkit}: {r.decode[mode]['length_options']}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs)")

    out = args.json or ROOT / "bench" / "results" / f"compare-{started:%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if gpu else None,
        },
        "settings": {
            "threads": args.threads,
            "warmup_updates": args.warmup,
            "timed_updates": args.updates,
            "max_tokens": args.max_tokens,
            "fairseq_update_freq": args.fairseq_update_freq,
            "deepnmt_update_freq": args.deepnmt_update_freq,
            "deepnmt_train_args": args.deepnmt_train_args,
            "model": args.shape.describe(),
            "device": args.device,
            "precision": args.precision,
            "decode_batch": args.decode_batch,
            "no_cudnn_attention": args.no_cudnn_attention,
            "beam": args.beam,
            "sampling_modes": {m: k for m, k in SAMPLING_MODES.items() if m in args.modes},
            "bt_sentences": args.bt_sentences,
            "fixed_len": FIXED_LEN,
            "decode_sentences": args.decode_sentences,
            "train_pairs": n_train,
            "words": args.words,
            "seed": args.seed,
        },  # fmt: skip
        "flops": flops,
        "rounds": {"count": args.rounds, "orders": orders, "deepnmt_vs_fastest_peer": ratios},
        "matmul_peak_gflops": {"start": peaks[0], "end": peaks[1], "used": peak},
        "toolkits": {r.toolkit: asdict(r) for r in results},
    }
    write_json(out, report)
    print(f"wrote {out}")
    if args.work_dir is None:
        shutil.rmtree(work_root, ignore_errors=True)
    sys.exit(0 if all(r.status == "ok" for r in results) else 1)


if __name__ == "__main__":
    main()
