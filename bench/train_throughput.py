"""Training throughput on CPU: 6L-6L d=256, 4 heads, FFN 1024, max_tokens 4096, fp32.

    .venv/bin/python bench/train_throughput.py [--threads 2] [--updates 10] [--warmup 3] [--vocab 8000]

Synthetic binarized data (written with IndexedDatasetWriter; source lengths uniform in 10..40 tokens, target = source +-2),
the real Trainer.train_step (collate + forward + label-smoothed loss + backward + RAdam step).
Prints the median target tokens/s over the timed updates (warm-up updates excluded) and peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--amp", choices=["none", "bf16"], default="none")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp) / "bin"
        synthetic(bin_dir, args.vocab, pairs=4000, seed=0)
        cfg = TrainConfig(
            data=str(bin_dir), source_lang="src", target_lang="tgt", save_dir=str(Path(tmp) / "ckpt"),
            max_tokens=4096, max_update=args.warmup + args.updates, warmup_updates=4000, amp=args.amp,
        )  # fmt: skip
        model_cfg = ModelConfig(args.vocab, args.vocab, 6, 6, d_model=256, ffn_dim=1024, heads=4)
        trainer = Trainer(cfg, model_cfg, Context(args.vocab, None), DistributedEnv.from_environ({}, "cpu"))
        train, _ = trainer._load_data()
        plan = train.batches(cfg.seed, 1, shuffle=True)
        rates, tokens = [], []
        for i in range(args.warmup + args.updates):
            start = time.perf_counter()
            batch = train.collate(plan[i])
            loss, _, _, _ = trainer.train_step([batch], float(batch.ntokens))
            trainer.num_updates += 1
            elapsed = time.perf_counter() - start
            if i >= args.warmup:
                rates.append(batch.ntokens / elapsed)
                tokens.append(batch.ntokens)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"train 6L-6L d=256 h=4 ffn=1024 vocab={args.vocab} max_tokens=4096 amp={args.amp} threads={args.threads}: "
        f"median {statistics.median(rates):.0f} target tok/s over {args.updates} updates "
        f"(min {min(rates):.0f}, max {max(rates):.0f}; {statistics.mean(tokens):.0f} target tokens/update); "
        f"peak RSS {peak:.0f} MiB"
    )


if __name__ == "__main__":
    main()
