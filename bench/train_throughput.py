"""Training throughput of the real training step (Updater.train_step) on synthetic data, on CPU or GPU, with an optional profile.

    .venv/bin/python bench/train_throughput.py [--threads 2] [--updates 10] [--warmup 3] [--vocab 8000]
    python bench/train_throughput.py --device cuda --amp bf16 --d-model 512 --ffn 2048 --heads 8 \\
        --encoder-layers 24 --max-tokens 16384 --updates 30 --profile

Synthetic binarized data (written with IndexedDatasetWriter; source lengths uniform in 10..40 tokens, target =
source +-2), the real Updater.train_step (collate + forward + label-smoothed loss + backward + Adam step).
Prints the median target tokens/s over the timed updates (warm-up updates excluded) and peak memory;
``--profile`` adds torch.profiler's top operators over three more updates. The side-by-side numbers against
other toolkits come from bench/compare.py; this script is for looking inside one configuration.

``--loop`` times the trainer's own loop (``Trainer.run``) instead of single updates between device
synchronisations, so that what overlaps across updates counts: ``--deferred-stats`` (the host queues update
k+1 before reading update k), and ``--compile`` / ``--pad-to-multiple`` (compilation happens in the warm-up
updates, which are not counted). The rate is the median of the per-update ``tokens_per_s`` in the run's log.

    python bench/train_throughput.py --device cuda --amp bf16 --max-tokens 16384 --loop --updates 50 --warmup 10
    python bench/train_throughput.py --device cuda --amp bf16 --max-tokens 16384 --loop --updates 50 --warmup 10 \
        --deferred-stats --compile --pad-to-multiple 8
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path

import compare
import numpy as np
import torch

from pipeline_lib.atomic import write_json
from pipeline_lib.cpu.allocator import keep_freed_memory
from pipeline_lib.data.indexed import split_prefix, write_dataset
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.memory_estimate import Recipe as MemoryRecipe
from pipeline_lib.model.memory_estimate import Shape as MemoryShape
from pipeline_lib.model.memory_estimate import estimate_training_memory
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.trainer import Context, Trainer


def synthetic(
    bin_dir: Path, vocab: int, pairs: int, seed: int, lengths: tuple[int, int] = (10, 40)
) -> tuple[list[int], list[int]]:
    """Write the splits; the train split's (source, target) lengths."""
    rng = np.random.default_rng(seed)
    train: tuple[list[int], list[int]] = ([], [])
    for split, n in (("train", pairs), ("valid", 16)):
        # Target lengths follow the source's (+-2), as in real parallel data, so padding stays realistic.
        src_len = rng.integers(lengths[0], lengths[1] + 1, size=n)
        tgt_len = np.clip(src_len + rng.integers(-2, 3, size=n), 1, None)
        for lang, lens in (("src", src_len), ("tgt", tgt_len)):
            write_dataset(split_prefix(bin_dir, split, lang), (rng.integers(4, vocab, size=k) for k in lens))
        if split == "train":
            train = (src_len.tolist(), tgt_len.tolist())
    return train


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--amp", choices=["none", "bf16", "fp16", "fairseq_fp16"], default="none")
    p.add_argument("--encoder-layers", type=int, default=6)
    p.add_argument("--decoder-layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--residual", default="post_ln")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--profile", action="store_true", help="torch.profiler over 3 more updates")
    p.add_argument("--loop", action="store_true", help="time Trainer.run's loop, not single updates")
    p.add_argument("--deferred-stats", action="store_true", help="train --deferred-stats (with --loop)")
    p.add_argument("--compile", action="store_true", help="train --compile")
    p.add_argument(
        "--compile-mode", default="default", help="train --compile-mode (reduce-overhead: CUDA graphs)"
    )
    p.add_argument("--update-freq", type=int, default=1, help="train --update-freq: micro-batches per update")
    p.add_argument("--pad-to-multiple", type=int, default=1)
    p.add_argument("--checkpoint-activations", action="store_true", help="train --checkpoint-activations")
    p.add_argument(
        "--lengths", type=int, nargs=2, default=(10, 40), metavar=("MIN", "MAX"), help="source length range"
    )
    p.add_argument("--json", type=Path, default=None, help="--loop: write the measurement here")
    args = p.parse_args()
    if args.json and not args.loop:
        p.error("--json needs --loop")
    return args


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.device == "cpu":
        keep_freed_memory()  # as `train` does on CPU
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        pairs = max(4000, (args.warmup + args.updates + 3) * args.max_tokens * args.update_freq // 20)
        lengths = synthetic(bin_dir, args.vocab, pairs=pairs, seed=0, lengths=tuple(args.lengths))
        cfg = TrainConfig(
            data=str(bin_dir), source_lang="src", target_lang="tgt", save_dir=str(Path(tmp) / "ckpt"),
            max_tokens=args.max_tokens, max_update=args.warmup + args.updates, warmup_updates=4000,
            amp=args.amp, device=args.device, compile=args.compile, pad_to_multiple=args.pad_to_multiple,
            compile_mode=args.compile_mode, update_freq=args.update_freq,
            deferred_stats=args.deferred_stats, log_interval=1, progress="none", optimizer="adam",
            checkpoint_activations=args.checkpoint_activations,
            # no dev points inside the timed stretch: a validation and its checkpoint_best.pt save (3 GB
            # for 60L-12L with Adam's moments) would land in the next update's time
            validate_interval_updates=0,
            # Admin's ω from its closed form: the profile run changes ω's values, not the cost of an update
            admin_closed_form=args.residual == "admin",
        )  # fmt: skip
        model_cfg = ModelConfig(
            args.vocab, args.vocab, args.encoder_layers, args.decoder_layers, d_model=args.d_model,
            ffn_dim=args.ffn, heads=args.heads, residual=args.residual,
        )  # fmt: skip
        env = DistributedEnv.from_environ({}, args.device)
        trainer = Trainer(cfg, model_cfg, Context(args.vocab, None), env)
        device = trainer.device
        if args.loop:
            started = time.perf_counter()
            trainer.run()
            result = loop_result(trainer, args, model_cfg, lengths, time.perf_counter() - started)
            print(result["summary"])
            if args.json:
                write_json(args.json, result)
            return
        train, _ = trainer._load_data()
        plan = train.batches(cfg.seed, 1, shuffle=True)

        def update(i: int) -> int:
            batch = train.collate(plan[i]).to(device)
            trainer.updater.train_step([batch], float(batch.ntokens), trainer.position.num_updates)
            trainer.position.num_updates += 1
            return batch.ntokens

        rates, tokens = [], []
        for i in range(args.warmup + args.updates):
            sync(device)
            start = time.perf_counter()
            n = update(i)
            sync(device)
            if i >= args.warmup:
                rates.append(n / (time.perf_counter() - start))
                tokens.append(n)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        gpu = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
            with profile(activities=acts) as prof:
                for i in range(args.warmup + args.updates, args.warmup + args.updates + 3):
                    update(i)
                sync(device)
            key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
            print(prof.key_averages().table(sort_by=key, row_limit=25))
    print(
        f"train {model_cfg.describe()} vocab={args.vocab} max_tokens={args.max_tokens} amp={args.amp} "
        f"{args.device} threads={args.threads}: median {statistics.median(rates):,.0f} target tok/s over "
        f"{args.updates} updates (min {min(rates):,.0f}, max {max(rates):,.0f}; {statistics.mean(tokens):,.0f} "
        f"target tokens/update); peak RSS {rss:,.0f} MiB" + (f", peak GPU {gpu:,.0f} MiB" if gpu else "")
    )


def loop_result(
    trainer: Trainer, args: argparse.Namespace, model_cfg: ModelConfig, lengths: tuple, wall_s: float
) -> dict:
    """The run's log after the warm-up updates: per-update and aggregate rates, peak memory, and (on a
    GPU) MFU against this card's matmul peak and the peak memory against the plan's estimate."""
    log = Path(trainer.cfg.save_dir) / "train_log.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    train = [r for r in records if r.get("kind") == "train"]
    timed = [r for r in train if r["update"] > args.warmup]
    last_warmup = [r for r in train if r["update"] == args.warmup][0]
    # a validation after update k (and its checkpoint saves) lands in update k+1's time
    inside = [
        r["update"]
        for r in records
        if r.get("kind") == "valid" and args.warmup <= r["update"] < timed[-1]["update"]
    ]
    if inside:
        raise SystemExit(
            f"validated after update(s) {inside}, inside the timed stretch: the rate would count it"
        )
    rates = [r["tokens_per_s"] for r in timed]
    # the whole timed stretch: robust to how one update's time falls between two log lines
    aggregate = sum(r["tokens_per_update"] for r in timed) / (timed[-1]["time"] - last_warmup["time"])
    levers = [f for f in ("deferred_stats", "compile", "checkpoint_activations") if getattr(args, f)]
    levers += ["cuda_graphs"] if args.compile_mode == "reduce-overhead" else []
    memory = max(r["memory_mb"] for r in train)
    result: dict = {
        "model": model_cfg.describe(), "residual": args.residual, "amp": args.amp, "device": args.device,
        "max_tokens": args.max_tokens, "update_freq": args.update_freq, "lengths": list(args.lengths), "vocab": args.vocab,
        "pad_to_multiple": args.pad_to_multiple, "levers": levers, "warmup_updates": args.warmup,
        "timed_updates": len(timed), "tokens_per_s_median": statistics.median(rates),
        "tokens_per_s_min": min(rates), "tokens_per_s_max": max(rates), "tokens_per_s_aggregate": aggregate,
        "target_tokens_per_update": statistics.mean(r["tokens_per_update"] for r in timed),
        "peak_memory_mib": memory, "memory_kind": train[-1]["memory_kind"], "wall_s": wall_s,
        "warmup_s": last_warmup["time"] - (train[0]["time"] - 1 / train[0]["updates_per_s"]),
    }  # fmt: skip
    shape = compare.Shape(
        model_cfg.encoder_layers,
        model_cfg.decoder_layers,
        model_cfg.d_model,
        model_cfg.ffn_dim,
        model_cfg.heads,
    )
    flops = compare.train_flops_per_target_token(lengths[0], lengths[1], args.vocab, shape)
    result["flops_per_target_token"] = flops["flops_per_target_token"]
    if args.device == "cuda":
        precision = {"none": "fp32", "fairseq_fp16": "fp16"}.get(args.amp, args.amp)
        peak = compare.matmul_peak(args.threads, "cuda", precision)
        result["matmul_peak_gflops"] = peak
        result["gflops"] = aggregate * flops["flops_per_target_token"] / 1e9
        result["mfu_vs_matmul_peak"] = result["gflops"] / peak
        result["gpu"] = torch.cuda.get_device_name()
        result["torch"] = torch.__version__
    estimate = estimate_training_memory(
        MemoryShape(shape.encoder_layers, shape.decoder_layers, shape.d_model, shape.ffn, shape.heads, args.vocab,
                    residual=args.residual),
        args.max_tokens, MemoryRecipe(model_cfg.dropout, model_cfg.attention_dropout,
                                      model_cfg.activation_dropout, amp=args.amp),
        checkpointing=args.checkpoint_activations, update_freq=args.update_freq,
    )  # fmt: skip
    result["plan_estimate_gb"] = estimate.total_gb
    result["measured_vs_estimate"] = memory * 2**20 / 1e9 / estimate.total_gb
    result["summary"] = (
        f"train loop {model_cfg.describe()} {args.residual} max_tokens={args.max_tokens} amp={args.amp} "
        f"{args.device} pad_to_multiple={args.pad_to_multiple} levers={'+'.join(levers) or 'none'}: median "
        f"{result['tokens_per_s_median']:,.0f} target tok/s over {len(rates)} updates (aggregate "
        f"{aggregate:,.0f}; min {min(rates):,.0f}, max {max(rates):,.0f}); peak memory {memory:,.0f} MiB "
        f"(plan estimate {estimate.total_gb:.2f} GB); warm-up {result['warmup_s']:.1f}s"
        + (f"; MFU {result['mfu_vs_matmul_peak']:.1%} of the matmul peak" if "gflops" in result else "")
    )
    return result


if __name__ == "__main__":
    main()
