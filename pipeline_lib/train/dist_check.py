"""Check a distributed launch before spending GPU hours on it.

    srun --nodes=2 --ntasks-per-node=8 python -m pipeline_lib.train.dist_check --device cuda
    torchrun --standalone --nproc-per-node=8 -m pipeline_lib.train.dist_check --device cuda

Every rank reads its place from the launcher (DistributedEnv), joins the process group, all-reduces
``rank + 1`` and prints one JSON line; with --out-dir each rank also writes ``rank<N>.json``.
The sum must be world_size * (world_size + 1) / 2 on every rank; a mismatch exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from datetime import timedelta
from pathlib import Path

from pipeline_lib.atomic import write_text
from pipeline_lib.train.distributed_env import DistributedEnv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline_lib.train.dist_check", description=__doc__)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--out-dir", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=120.0, help="rendezvous timeout, seconds")
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    env = DistributedEnv.from_environ(os.environ, args.device)
    device = torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(env.local_rank)
        device = torch.device("cuda", env.local_rank)
    dist.init_process_group(
        backend=env.backend,
        init_method=env.init_method,
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=args.timeout),
    )
    try:
        value = torch.tensor([float(env.rank + 1)], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        total = value.item()
    finally:
        dist.destroy_process_group()
    expected = env.world_size * (env.world_size + 1) / 2
    record = {
        "rank": env.rank,
        "world_size": env.world_size,
        "local_rank": env.local_rank,
        "launcher": env.launcher,
        "backend": env.backend,
        "master": f"{env.master_addr}:{env.master_port}",
        "host": socket.gethostname(),
        "sum": total,
        "expected": expected,
    }
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if args.out_dir is not None:
        write_text(args.out_dir / f"rank{env.rank}.json", line + "\n")
    return 0 if total == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
