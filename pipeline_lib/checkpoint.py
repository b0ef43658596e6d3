"""Checkpoint files: format, atomic writes, integrity-checked reads, model loading, and the names
and rotation of a training directory's checkpoints. Shared by train, average and translate.

A checkpoint is a ``torch.save`` dict (readable with ``torch.load(weights_only=True)``) with keys:
``format`` ("deepnmt-checkpoint/1"), ``model_config`` (ModelConfig.to_dict()), ``model`` (state_dict),
``vocab_sha256``, ``data`` ({"bin_dir", "src_lang", "tgt_lang"}), ``train_config`` (dict),
``num_updates``, ``epoch``, ``optimizer``, ``scheduler``, ``scaler``,
``iterator`` ({"epoch", "batch_index"}: the next batch to train), ``admin_profile`` (dict or None),
``status`` ("ok"), and ``checksum``: a CRC32 over every tensor's bytes.

No RNG state: training draws every random number from (seed, update, rank, micro-batch) and
(seed, epoch), so a restored state would change nothing (tests/train/test_resume_rng.py). Older
checkpoints that carry an ``rng`` key still load; nothing reads it.

File names in a save dir: ``checkpoint_last.pt`` (the newest state), ``checkpoint{E}.pt`` (the end of
epoch E) and ``checkpoint_{E}_{U}.pt`` (update U, during epoch E).

Why the checksum: torch's zip reader notices a truncated file, but not a flipped byte inside tensor
data; a silently corrupted optimizer state would make a resumed run diverge from the original.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pipeline_lib.atomic import WriteError, atomic_open, copy_file
from pipeline_lib.atomic import remove_stale_temp_files as remove_stale_temp_files  # the trainer's
from pipeline_lib.errors import CheckpointError, ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel, build_model, load_model_state

CHECKPOINT_FORMAT = "deepnmt-checkpoint/1"
REQUIRED_KEYS = ("format", "model_config", "model", "num_updates", "epoch", "status")
LAST = "checkpoint_last.pt"
EPOCH_RE = re.compile(r"^checkpoint(\d+)\.pt$")
INTERVAL_RE = re.compile(r"^checkpoint_(\d+)_(\d+)\.pt$")


def epoch_path(save_dir: Path, epoch: int) -> Path:
    return save_dir / f"checkpoint{epoch}.pt"


def interval_path(save_dir: Path, epoch: int, update: int) -> Path:
    return save_dir / f"checkpoint_{epoch}_{update}.pt"


def _position(path: Path) -> tuple[float, float] | None:
    """(epoch, update) of a checkpoint name; an epoch-end checkpoint comes after every update of its epoch."""
    if m := EPOCH_RE.match(path.name):
        return int(m.group(1)), math.inf
    if m := INTERVAL_RE.match(path.name):
        return int(m.group(1)), int(m.group(2))
    return None


def epoch_checkpoints(save_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(epoch, path) of every checkpoint{E}.pt, oldest first."""
    d = Path(save_dir)
    found = [(int(m.group(1)), p) for p in d.glob("checkpoint*.pt") if (m := EPOCH_RE.match(p.name))]
    return sorted(found)


def interval_checkpoints(save_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(update, path) of every checkpoint_{E}_{U}.pt, oldest first."""
    d = Path(save_dir)
    found = [(int(m.group(2)), p) for p in d.glob("checkpoint_*_*.pt") if (m := INTERVAL_RE.match(p.name))]
    return sorted(found)


def resume_candidates(save_dir: str | os.PathLike[str]) -> list[Path]:
    """checkpoint_last.pt first, then the epoch/interval checkpoints by training position, newest first
    (by name, not mtime: a copied or touched file must not jump the queue)."""
    d = Path(save_dir)
    others = [(pos, p) for p in d.glob("checkpoint*.pt") if (pos := _position(p)) is not None]
    others.sort(reverse=True)
    last = d / LAST
    return ([last] if last.exists() else []) + [p for _, p in others]


def newest_readable(save_dir: Path) -> tuple[dict[str, Any], Path] | None:
    """The newest checkpoint that loads and verifies, skipping damaged ones with a warning; None in a
    directory without checkpoints, CheckpointError if none is readable."""
    candidates = resume_candidates(save_dir)
    if not candidates:
        return None
    errors = []
    for path in candidates:
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            errors.append(str(exc))
            print(f"warning: {exc}; trying an older checkpoint", file=sys.stderr)
            continue
        if errors:
            print(f"warning: falling back to {path} (update {state['num_updates']})", file=sys.stderr)
        return state, path
    raise CheckpointError(
        f"{save_dir}: no readable checkpoint to resume from ({'; '.join(errors)}); "
        "remove the directory to start over"
    )


def last_checkpoints(
    save_dir: str | os.PathLike[str], n: int, kind: str = "epoch", upper_bound: int | None = None
) -> list[Path]:
    """The last ``n`` checkpoint{epoch}.pt (kind epoch) or checkpoint_{e}_{u}.pt (kind update) files;
    with ``upper_bound`` only those whose epoch (update) is <= it, as fairseq's
    scripts/average_checkpoints.py last_n_checkpoints (Transformer-Clinic @70f72b7
    fairseq/scripts/average_checkpoints.py:70-88)."""
    if n <= 0:
        raise ConfigError(f"number of checkpoints to average must be positive, got {n}")
    if upper_bound is not None and upper_bound < 1:
        raise ConfigError(f"checkpoint upper bound must be positive, got {upper_bound}")
    found = epoch_checkpoints(save_dir) if kind == "epoch" else interval_checkpoints(save_dir)
    if upper_bound is not None:
        found = [(key, p) for key, p in found if key <= upper_bound]
    if len(found) < n:
        bound = f" up to {kind} {upper_bound}" if upper_bound is not None else ""
        raise CheckpointError(
            f"{save_dir}: asked to average {n} {kind} checkpoints{bound} but found {len(found)}"
        )
    return [p for _, p in found[-n:]]


def prune_epochs(save_dir: Path, finished: int, keep: int) -> None:
    """Keep the ``keep`` newest epoch checkpoints up to epoch ``finished`` (keep < 0: all)."""
    if keep < 0:
        return
    for epoch, path in epoch_checkpoints(save_dir):
        if epoch <= finished - keep:
            path.unlink(missing_ok=True)


def prune_intervals(save_dir: Path, keep: int) -> None:
    """Keep the ``keep`` newest interval checkpoints."""
    for _, path in interval_checkpoints(save_dir)[:-keep]:
        path.unlink(missing_ok=True)


def _tensors(obj: Any, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
    """Every tensor in a nested dict/list structure, in a deterministic order."""
    if isinstance(obj, Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            if prefix == "" and key == "checksum":
                continue
            yield from _tensors(obj[key], f"{prefix}/{key}")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _tensors(item, f"{prefix}/{i}")


def checksum(state: dict[str, Any]) -> int:
    crc = 0
    for name, tensor in _tensors(state):
        crc = zlib.crc32(name.encode(), crc)
        data = tensor.detach().cpu().contiguous()
        if data.numel():
            crc = zlib.crc32(data.reshape(-1).view(torch.uint8).numpy(), crc)
    return crc


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``state`` to ``path`` atomically: a reader sees the old file or the new one, never half."""
    path = Path(path)
    state = {**state, "format": CHECKPOINT_FORMAT}
    state["checksum"] = checksum(state)
    try:
        with atomic_open(path, "wb", fsync=True) as handle:
            torch.save(state, handle)
    except WriteError as exc:
        raise _with_resume_point(exc, path) from exc.cause


def load_checkpoint(path: str | os.PathLike[str], map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read and verify a checkpoint; CheckpointError (naming the file) on any problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if (refusal := _unsafe_refusal(exc)) is None:
            raise CheckpointError(f"checkpoint {path} is truncated or corrupt: {_first_line(exc)}") from None
        raise CheckpointError(f"checkpoint {path} refused as unsafe, not loaded: {refusal}") from None
    except Exception as exc:  # torch raises RuntimeError/EOFError/... on truncated or damaged files
        raise CheckpointError(f"checkpoint {path} is truncated or corrupt: {_first_line(exc)}") from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path} is not a {CHECKPOINT_FORMAT} checkpoint (format: {found!r})")
    missing = [key for key in REQUIRED_KEYS if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks the key(s) {', '.join(missing)}")
    if "checksum" in state and checksum(state) != state["checksum"]:
        raise CheckpointError(f"checkpoint {path} is corrupt: tensor checksum mismatch")
    return state


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# torch's weights-only unpickler refuses a pickle that would call or build anything beyond tensors
# and plain containers; its message then advises ``weights_only=False``, which would run that code.
_WEIGHTS_ONLY = "Weights only load failed"
_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")
_OPERAND = re.compile(r"Unsupported operand (\d+)")


def _unsafe_refusal(exc: pickle.UnpicklingError) -> str | None:
    """Why torch's weights-only load refused the file, in our words; None for another pickle error
    (a damaged file). Never repeats torch's advice to load with ``weights_only=False``."""
    text = str(exc)
    if not text.startswith(_WEIGHTS_ONLY):
        return None
    if m := _GLOBAL.search(text):
        return (
            f"it would import {m.group(1)} when unpickled: a checkpoint holds only tensors and plain "
            "data, so this file carries code (do not load it another way; use a checkpoint "
            "written by this pipeline)"
        )
    if m := _OPERAND.search(text):
        return (
            f"its pickle uses opcode {m.group(1)}, which a weights-only load does not run: damaged, "
            "or not a checkpoint written by this pipeline (do not load it another way)"
        )
    return (
        "it holds something other than tensors and plain data (do not load it another way; use a "
        "checkpoint written by this pipeline)"
    )


def load_model(
    path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> tuple[TransformerModel, dict]:
    """The model (eval mode, fp32, on ``device``) and the checkpoint dict without optimizer state."""
    state = load_checkpoint(path)
    config = ModelConfig.from_dict(state["model_config"], where=f"{path}: model_config")
    model = build_model(config)
    weights = {k: v.float() if v.is_floating_point() else v for k, v in state["model"].items()}
    try:
        load_model_state(model, weights)
    except RuntimeError as exc:
        raise CheckpointError(f"checkpoint {path}: weights do not match its model_config: {exc}") from exc
    meta = {k: v for k, v in state.items() if k not in ("optimizer", "scaler", "model")}
    return model.to(device).eval(), meta


def copy_checkpoint(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Atomically make ``dst`` a copy of ``src``.

    A real copy, not a hard link: damage to one file (a truncating writer, a bad block) must not take
    the fallback checkpoint with it.
    """
    try:
        copy_file(src, dst, fsync=True)
    except WriteError as exc:
        raise _with_resume_point(exc, Path(dst)) from exc.cause


def _with_resume_point(exc: WriteError, path: Path) -> WriteError:
    """A failed save in a training directory: say which checkpoint a rerun resumes from."""
    if path.name != LAST and _position(path) is None:
        return exc  # not a training checkpoint (an average, say): the previous file is what was kept
    for candidate in resume_candidates(path.parent):
        try:  # mmap: the counter without reading the tensors
            state = torch.load(candidate, map_location="cpu", weights_only=True, mmap=True)
            update = state["num_updates"]
        except Exception:  # noqa: BLE001 - damaged: a rerun skips it too
            continue
        kept = f"the last good checkpoint, {candidate} (update {update}); a rerun resumes from it"
        return exc.keeping(kept)
    return exc.keeping("no checkpoint; a rerun starts afresh")
