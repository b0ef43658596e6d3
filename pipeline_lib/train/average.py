"""Checkpoint averaging (fairseq's scripts/average_checkpoints.py semantics).

Every floating-point tensor of the model state is summed in float32 (fp16/bf16 weights included)
and divided by the count, then cast back to the first checkpoint's dtype. Non-float tensors must be
equal across inputs. The result is a normal checkpoint (loadable by ``load_model``) without
optimizer state, carrying the first input's metadata and ``averaged_from``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from pipeline_lib.checkpoint import load_checkpoint, save_checkpoint
from pipeline_lib.errors import CheckpointError, ConfigError


def average_checkpoints(paths: list[Path]) -> dict[str, Any]:
    if not paths:
        raise ConfigError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    keys = list(first["model"].keys())
    last_position = (int(first["num_updates"]), int(first["epoch"]))
    sums: dict[str, torch.Tensor] = {}
    for k, v in first["model"].items():
        sums[k] = v.to(torch.float32).clone() if v.is_floating_point() else v.clone()
    for path in paths[1:]:
        state = load_checkpoint(path)
        if state["model_config"] != first["model_config"]:
            raise CheckpointError(f"{path}: model_config differs from {paths[0]}; cannot average")
        model = state["model"]
        if list(model.keys()) != keys:
            raise CheckpointError(f"{path}: parameter names differ from {paths[0]}")
        for k, v in model.items():
            if v.shape != sums[k].shape:
                raise CheckpointError(
                    f"{path}: {k} has shape {tuple(v.shape)}, {paths[0]} has {tuple(sums[k].shape)}"
                )
            if v.is_floating_point():
                sums[k].add_(v.to(torch.float32))
            elif not torch.equal(v, sums[k]):
                raise CheckpointError(f"{path}: non-float tensor {k} differs from {paths[0]}")
        last_position = (int(state["num_updates"]), int(state["epoch"]))
        del state
    n = len(paths)
    averaged = {
        k: (sums[k].div_(n).to(first["model"][k].dtype) if first["model"][k].is_floating_point() else sums[k])
        for k in keys
    }
    out = {k: v for k, v in first.items() if k not in ("optimizer", "scaler", "checksum")}
    out.update(
        model=averaged,
        optimizer=None,
        scaler=None,
        averaged_from=[str(p) for p in paths],
        num_updates=last_position[0],
        epoch=last_position[1],
    )
    return out


def write_average(paths: list[Path], output: str | os.PathLike[str]) -> dict[str, Any]:
    state = average_checkpoints(paths)
    save_checkpoint(state, output)
    return state
