"""``train``: train a Transformer on a binarized directory (fairseq-style flags).

Usage::

    python -m pipeline_lib train --data work/demo/bin --source-lang en --target-lang fr \\
        --save-dir work/demo/ckpt/6L-admin --arch base --encoder-layers 6 --decoder-layers 6 \\
        --residual admin --admin-profile work/demo/ckpt/6L-admin/profile.json \\
        --optimizer radam --adam-betas '(0.9, 0.98)' --lr 7e-4 --warmup-updates 8000 \\
        --max-tokens 4096 --update-freq 1 --max-epoch 50 --amp bf16 --device cuda

    torchrun --nproc-per-node 8 -m pipeline_lib train ...     # one node, 8 GPUs
    srun --ntasks-per-node 8 python -m pipeline_lib train ...  # SLURM, ranks from SLURM_* env

Re-running the same command resumes from ``{save-dir}/checkpoint_last.pt`` (falling back to the
newest readable checkpoint if that one is damaged). Exit codes: 0 completed or diverged (see
``status.json``), 75 preempted by SIGTERM/SIGUSR1 (checkpoint saved, re-run to resume),
2 bad input/config, anything else a crash.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import torch

from pipeline_lib.cpu.allocator import keep_freed_memory
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.errors import InputError
from pipeline_lib.model.cli_args import add_model_arguments, model_config_from_args
from pipeline_lib.model.linear import CPU_GEMMS
from pipeline_lib.train.config import AMP_MODES, DEVICES, OPTIMIZERS, TrainConfig, parse_betas


def _threshold(text: str) -> float | str:
    if text == "unigram":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'unigram', got {text!r}") from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--data", required=True, help="binarized directory (python -m pipeline_lib binarize)")
    g.add_argument("--source-lang", required=True)
    g.add_argument("--target-lang", required=True)
    g.add_argument("--train-subset", default="train")
    g.add_argument("--valid-subset", default="valid")
    g.add_argument("--save-dir", required=True)
    g.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per batch per process")
    g.add_argument("--max-sentences", type=int, default=None, help="sentences per batch (default: no limit)")

    add_model_arguments(p)
    m = p.add_argument_group("admin")
    m.add_argument("--admin-profile", default=None, help="ω profile JSON (required with --residual admin)")
    m.add_argument(
        "--admin-closed-form", action="store_true", help="Admin ω from the closed form, no profile"
    )

    o = p.add_argument_group("optimization")
    o.add_argument("--optimizer", choices=OPTIMIZERS, default="radam")
    o.add_argument("--adam-betas", default="(0.9, 0.98)")
    o.add_argument("--adam-eps", type=float, default=1e-8)
    o.add_argument("--lr", type=float, default=7e-4, help="peak learning rate")
    o.add_argument("--warmup-updates", type=int, default=4000)
    o.add_argument("--warmup-init-lr", type=float, default=1e-7)
    o.add_argument("--clip-norm", type=float, default=0.0, help="0 = no clipping")
    o.add_argument("--weight-decay", type=float, default=0.0)
    o.add_argument("--label-smoothing", type=float, default=0.1)
    o.add_argument("--update-freq", type=int, default=1, help="accumulate gradients over N batches")
    o.add_argument("--max-epoch", type=int, default=0, help="0 = no limit")
    o.add_argument("--max-update", type=int, default=0, help="0 = no limit")
    o.add_argument("--seed", type=int, default=1)
    o.add_argument("--divergence-window", type=int, default=1000)
    o.add_argument(
        "--divergence-threshold",
        type=_threshold,
        default=None,
        help="training nll (bits/token) above which, as a mean over the last --divergence-window updates after "
        "warm-up, the run counts as diverged. Default log2(vocab): worse than a uniform guess; 'unigram': "
        "no better than a unigram model of the training targets (a stalled run)",
    )

    r = p.add_argument_group("runtime")
    r.add_argument("--device", choices=DEVICES, default="cuda" if torch.cuda.is_available() else "cpu")
    r.add_argument("--amp", choices=AMP_MODES, default="none")
    r.add_argument("--num-threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    r.add_argument(
        "--cpu-workers",
        type=int,
        default=1,
        help="CPU: run this many of an update's --update-freq micro-batches at once, one thread each "
        "(same update, same result up to float rounding; e.g. --max-tokens 2048 --update-freq 2 "
        "--cpu-workers 2 on 2 cores)",
    )
    r.add_argument(
        "--cpu-gemm",
        choices=CPU_GEMMS,
        default="auto",
        help="fp32 CPU training: the linear layers' matmul library (auto: oneDNN on AVX-512 CPUs for "
        "d >= 256 and --max-tokens >= 2048, where it measured faster than MKL; "
        "pipeline_lib/model/linear.py)",
    )
    r.add_argument("--save-interval-updates", type=int, default=0, help="also save every N updates (0: off)")
    r.add_argument(
        "--keep-interval-updates", type=int, default=0, help="keep N checkpoint_{epoch}_{update}.pt"
    )
    r.add_argument("--keep-last-epochs", type=int, default=-1, help="keep N checkpoint{epoch}.pt (-1: all)")
    r.add_argument("--log-interval", type=int, default=100, help="JSONL train record every N updates")
    r.add_argument("--progress", choices=["auto", "tqdm", "none"], default="auto", help="auto: tqdm on a TTY")


TRAIN_FIELDS = (
    "data", "source_lang", "target_lang", "save_dir", "train_subset", "valid_subset", "optimizer", "adam_eps",
    "lr", "warmup_updates", "warmup_init_lr", "clip_norm", "weight_decay", "label_smoothing", "max_tokens",
    "max_sentences", "update_freq", "max_epoch", "max_update", "seed", "save_interval_updates",
    "keep_interval_updates", "keep_last_epochs", "log_interval", "amp", "device", "divergence_window",
    "divergence_threshold", "admin_profile", "admin_closed_form", "num_threads", "cpu_workers", "cpu_gemm",
    "progress",
)  # fmt: skip


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    fields = {name: getattr(args, name) for name in TRAIN_FIELDS}
    fields["adam_betas"] = parse_betas(args.adam_betas)
    return TrainConfig(**fields)


def read_vocab(bin_dir: str) -> tuple[int, str]:
    path = Path(bin_dir) / "vocab.txt"
    if not path.is_file():
        raise InputError(f"{path}: vocabulary not found (run `python -m pipeline_lib binarize`)")
    vocab = Vocabulary.load(path)
    meta_path = Path(bin_dir) / "meta.json"
    sha = vocab.sha256()
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("vocab_sha256") not in (None, sha):
            raise InputError(f"{meta_path}: vocab_sha256 does not match {path}")
    return len(vocab), sha


def run(args: argparse.Namespace) -> int:
    from pipeline_lib.train.distributed_env import DistributedEnv
    from pipeline_lib.train.trainer import Context, Trainer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    cfg = train_config_from_args(args)
    vocab_size, vocab_sha = read_vocab(cfg.data)
    model_cfg = model_config_from_args(args, vocab_size, vocab_size)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    if cfg.device == "cpu":
        keep_freed_memory()  # every update re-allocates the same activations (pipeline_lib/cpu/allocator.py)
    env = DistributedEnv.from_environ(os.environ, cfg.device)
    if env.is_distributed:
        import torch.distributed as dist

        if cfg.device == "cuda":
            torch.cuda.set_device(env.local_rank)
        dist.init_process_group(
            env.backend, init_method=env.init_method, rank=env.rank, world_size=env.world_size
        )
        # print, not logging: under torchrun the root logger may already be configured (basicConfig no-op)
        print(
            f"distributed: rank {env.rank} of {env.world_size} (local rank {env.local_rank}), "
            f"backend {env.backend}, rendezvous {env.init_method}",
            file=sys.stderr,
        )
    try:
        outcome = Trainer(cfg, model_cfg, Context(vocab_size, vocab_sha), env).run()
    finally:
        if env.is_distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
    if outcome.status == "diverged":
        print(f"training diverged at update {outcome.update}: {outcome.reason}")
    return outcome.exit_code
