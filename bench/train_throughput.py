"""Training throughput of the real Trainer.train_step on synthetic data, on CPU or GPU, with an optional profile.

    .venv/bin/python bench/train_throughput.py [--threads 2] [--updates 10] [--warmup 3] [--vocab 8000]
    python bench/train_throughput.py --device cuda --amp bf16 --d-model 512 --ffn 2048 --heads 8 \\
        --encoder-layers 24 --max-tokens 16384 --updates 30 --profile

Synthetic binarized data (written with IndexedDatasetWriter; source lengths uniform in 10..40 tokens, target =
source +-2), the real Trainer.train_step (collate + forward + label-smoothed loss + backward + Adam step).
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

import numpy as np
import torch

from pipeline_lib.cpu.allocator import keep_freed_memory
from pipeline_lib.data.indexed import split_prefix, write_dataset
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.trainer import Context, Trainer


def synthetic(bin_dir: Path, vocab: int, pairs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for split, n in (("train", pairs), ("valid", 16)):
        # Target lengths follow the source's (+-2), as in real parallel data, so padding stays realistic.
        src_len = rng.integers(10, 41, size=n)
        tgt_len = np.clip(src_len + rng.integers(-2, 3, size=n), 1, None)
        for lang, lengths in (("src", src_len), ("tgt", tgt_len)):
            write_dataset(
                split_prefix(bin_dir, split, lang), (rng.integers(4, vocab, size=k) for k in lengths)
            )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none")
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
    p.add_argument("--pad-to-multiple", type=int, default=1)
    return p.parse_args()


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
        pairs = max(4000, (args.warmup + args.updates + 3) * args.max_tokens // 20)
        synthetic(bin_dir, args.vocab, pairs=pairs, seed=0)
        cfg = TrainConfig(
            data=str(bin_dir), source_lang="src", target_lang="tgt", save_dir=str(Path(tmp) / "ckpt"),
            max_tokens=args.max_tokens, max_update=args.warmup + args.updates, warmup_updates=4000,
            amp=args.amp, device=args.device, compile=args.compile, pad_to_multiple=args.pad_to_multiple,
            deferred_stats=args.deferred_stats, log_interval=1, progress="none", optimizer="adam",
        )  # fmt: skip
        model_cfg = ModelConfig(
            args.vocab, args.vocab, args.encoder_layers, args.decoder_layers, d_model=args.d_model,
            ffn_dim=args.ffn, heads=args.heads, residual=args.residual,
        )  # fmt: skip
        env = DistributedEnv.from_environ({}, args.device)
        trainer = Trainer(cfg, model_cfg, Context(args.vocab, None), env)
        device = trainer.device
        if args.loop:
            print(loop_summary(trainer, args, model_cfg))
            return
        train, _ = trainer._load_data()
        plan = train.batches(cfg.seed, 1, shuffle=True)

        def update(i: int) -> int:
            batch = train.collate(plan[i]).to(device)
            trainer.train_step([batch], float(batch.ntokens))
            trainer.num_updates += 1
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


def loop_summary(trainer: Trainer, args: argparse.Namespace, model_cfg: ModelConfig) -> str:
    """Run the real training loop; the per-update rates of its log after the warm-up updates."""
    trainer.run()
    log = Path(trainer.cfg.save_dir) / "train_log.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in records if r.get("kind") == "train" and r["update"] > args.warmup]
    levers = [f for f in ("deferred_stats", "compile") if getattr(args, f)]
    memory = max(r["memory_mb"] for r in records if r.get("kind") == "train")
    return (
        f"train loop {model_cfg.describe()} max_tokens={args.max_tokens} amp={args.amp} {args.device} "
        f"pad_to_multiple={args.pad_to_multiple} levers={'+'.join(levers) or 'none'}: median "
        f"{statistics.median(rates):,.0f} target tok/s over {len(rates)} updates "
        f"(min {min(rates):,.0f}, max {max(rates):,.0f}); peak memory {memory:,.0f} MiB"
    )


if __name__ == "__main__":
    main()
