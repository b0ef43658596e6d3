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
2 bad input/config, 74 a write failed (disk full, permission: the message names the checkpoint a
re-run resumes from), anything else a crash.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import torch

from pipeline_lib.atomic import write_bytes
from pipeline_lib.cpu.allocator import keep_freed_memory
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.dataclass_cli import add_dataclass_arguments, dataclass_from_args
from pipeline_lib.errors import InputError
from pipeline_lib.model.cli_args import add_model_arguments, model_config_from_args
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.run_identity import TRAINED_FILE, prepare_save_dir, run_identity
from pipeline_lib.train.run_log import STATUS_FILE


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, TrainConfig)
    add_model_arguments(p)


def train_config_from_args(args: argparse.Namespace) -> TrainConfig:
    return dataclass_from_args(TrainConfig, args)


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
    import torch.distributed as dist

    if env.is_distributed:
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
        if env.rank == 0:
            identity = run_identity(cfg.to_dict(), model_cfg.to_dict(), env.world_size)
            prepare_save_dir(Path(cfg.save_dir), identity)
        if env.is_distributed:
            dist.barrier()  # no rank reads the save dir before rank 0 has set another run aside
        outcome = Trainer(cfg, model_cfg, Context(vocab_size, vocab_sha), env).run()
        if env.rank == 0 and outcome.status != "preempted":
            # the workflow's output: only a concluded run has one (status.json alone can say preempted)
            save_dir = Path(cfg.save_dir)
            write_bytes(save_dir / TRAINED_FILE, (save_dir / STATUS_FILE).read_bytes())
    finally:
        if env.is_distributed and dist.is_initialized():
            dist.destroy_process_group()
    if outcome.status == "diverged":
        print(f"training diverged at update {outcome.update}: {outcome.reason}")
    return outcome.exit_code
