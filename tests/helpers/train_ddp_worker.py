"""Run under torchrun (2 ranks) or alone: gradients of the first update of a tiny model, saved by rank 0."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.trainer import Context, Trainer


def main(bin_dir: str, out: str, update_freq: int) -> None:
    torch.set_num_threads(1)
    env = DistributedEnv.from_environ(os.environ, "cpu")
    if env.is_distributed:
        dist.init_process_group(
            env.backend, init_method=env.init_method, rank=env.rank, world_size=env.world_size
        )
    cfg = TrainConfig(
        data=bin_dir, source_lang="xx", target_lang="yy", save_dir=out + ".unused", max_tokens=200,
        update_freq=update_freq, max_update=1,
    )  # fmt: skip
    model_cfg = ModelConfig(24, 24, 2, 2, d_model=32, ffn_dim=64, heads=2, dropout=0.0)
    trainer = Trainer(cfg, model_cfg, Context(24, None), env)
    trainer.updater.wrap_ddp()
    train, _ = trainer._load_data()
    plan = train.batches(cfg.seed, 1, shuffle=True, multiple_of=trainer.world)
    chunk = plan[: trainer.world * update_freq]
    local = [train.collate(idx) for idx in chunk[trainer.rank :: trainer.world]]
    total = trainer.ranks.all_reduce([float(sum(b.ntokens for b in local))])[0]
    trainer.updater.accumulate_gradients(local, total, update=0)
    if trainer.rank == 0:
        torch.save({n: p.grad.clone() for n, p in trainer.model.named_parameters()}, out)
    if env.is_distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
