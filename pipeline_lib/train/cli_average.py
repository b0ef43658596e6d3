"""``average``: average checkpoints into one (fairseq's average_checkpoints.py).

Usage::

    python -m pipeline_lib average --save-dir work/ckpt/6L --num-epoch-checkpoints 5 --output work/ckpt/6L/avg5.pt
    python -m pipeline_lib average --save-dir work/ckpt/6L --num-epoch-checkpoints 10 \
        --checkpoint-upper-bound 50 --output avg.pt   # epochs 41-50, as fairseq's script
    python -m pipeline_lib average --save-dir work/ckpt/6L --num-update-checkpoints 5 --output avg.pt
    python -m pipeline_lib average --inputs a.pt b.pt c.pt --output avg.pt

Float tensors are summed in float32 and divided by the count; the output is a checkpoint that
``pipeline_lib.checkpoint.load_model`` (and ``translate``) loads. Written atomically.
"""

from __future__ import annotations

import argparse

from pipeline_lib.checkpoint import last_checkpoints
from pipeline_lib.dataclass_cli import add_dataclass_arguments
from pipeline_lib.divergence.placeholders import add_skip_argument, skip_diverged
from pipeline_lib.errors import ConfigError
from pipeline_lib.train.average import write_average
from pipeline_lib.train.average_settings import AverageSettings


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, AverageSettings)
    add_skip_argument(p)


def run(args: argparse.Namespace) -> int:
    if args.skip_if_diverged and skip_diverged(args.skip_if_diverged, checkpoint=args.output):
        return 0
    if args.checkpoint_upper_bound is not None and args.num_epoch_checkpoints is None:
        # fairseq's script asserts the same (Transformer-Clinic @70f72b7 scripts/average_checkpoints.py:123-124)
        raise ConfigError("--checkpoint-upper-bound requires --num-epoch-checkpoints")
    if args.inputs:
        if args.num_epoch_checkpoints or args.num_update_checkpoints:
            raise ConfigError(
                "--num-epoch-checkpoints/--num-update-checkpoints go with --save-dir, not --inputs"
            )
        paths = list(args.inputs)
    else:
        if (args.num_epoch_checkpoints is None) == (args.num_update_checkpoints is None):
            raise ConfigError(
                "with --save-dir give exactly one of --num-epoch-checkpoints / --num-update-checkpoints"
            )
        if args.num_epoch_checkpoints is not None:
            paths = last_checkpoints(
                args.save_dir, args.num_epoch_checkpoints, "epoch", upper_bound=args.checkpoint_upper_bound
            )
        else:
            paths = last_checkpoints(args.save_dir, args.num_update_checkpoints, "update")
    state = write_average(paths, args.output)
    print(
        f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) -> {args.output} "
        f"(update {state['num_updates']})"
    )
    return 0
