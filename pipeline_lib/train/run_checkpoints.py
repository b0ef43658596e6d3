"""A run's checkpoints: which files a save writes and keeps, and whether a checkpoint found in the save
dir may be resumed by this command.

Like fairseq's ``checkpoint_utils.save_checkpoint``: ``checkpoint_last.pt`` always; ``checkpoint{epoch}.pt``
at an epoch end (the newest ``--keep-last-epochs`` kept); ``checkpoint_{epoch}_{update}.pt`` every
``--save-interval-updates`` when ``--keep-interval-updates`` asks for them (the newest N kept);
``checkpoint_best.pt`` at each validation with a new lowest dev loss (never a resume candidate: the run
resumes from its newest position, not its best).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.checkpoint import (
    LAST,
    copy_checkpoint,
    epoch_path,
    interval_path,
    prune_epochs,
    prune_intervals,
    save_checkpoint,
)
from pipeline_lib.errors import CheckpointError
from pipeline_lib.model.admin import AdminProfile
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train.config import TRAJECTORY_KEYS, TrainConfig
from pipeline_lib.train.position import Position


def save_run_checkpoint(
    state: dict[str, Any], save_dir: Path, cfg: TrainConfig, epoch: int, num_updates: int, epoch_end: bool
) -> None:
    """``epoch`` is the epoch in progress (at an epoch end, the one after the finished epoch)."""
    if epoch_end:
        finished = epoch - 1
        path = epoch_path(save_dir, finished)
        save_checkpoint(state, path)
        copy_checkpoint(path, save_dir / LAST)
        prune_epochs(save_dir, finished, cfg.keep_last_epochs)
        return
    if cfg.keep_interval_updates > 0:
        path = interval_path(save_dir, epoch, num_updates)
        save_checkpoint(state, path)
        copy_checkpoint(path, save_dir / LAST)
        prune_intervals(save_dir, cfg.keep_interval_updates)
    else:
        save_checkpoint(state, save_dir / LAST)


BEST = "checkpoint_best.pt"


def save_best_checkpoint(state: dict[str, Any], save_dir: Path) -> None:
    save_checkpoint(state, save_dir / BEST)


@dataclass
class RunSaver:
    """The run's saves, as the loop asks for them (rank 0 writes; the others do nothing)."""

    state: Callable[[], dict[str, Any]]  # the checkpoint's contents now
    save_dir: Path
    cfg: TrainConfig
    position: Position
    is_main: bool

    @property
    def last(self) -> Path:
        return self.save_dir / LAST

    def save(self, epoch_end: bool = False) -> None:
        """checkpoint_last.pt always; checkpoint{epoch}.pt at an epoch end; interval files when asked."""
        if self.is_main:
            pos = self.position
            save_run_checkpoint(self.state(), self.save_dir, self.cfg, pos.epoch, pos.num_updates, epoch_end)

    def save_best(self) -> None:
        """checkpoint_best.pt: the weights of the lowest dev loss so far."""
        if self.is_main:
            save_best_checkpoint(self.state(), self.save_dir)


def check_resumable(
    state: dict[str, Any],
    path: Path,
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    vocab_sha256: str | None,
    admin_profile: AdminProfile | None,
) -> None:
    """A clear error if the checkpoint is of another model, vocabulary or Admin profile; a warning if a
    setting that changes the trajectory differs (the run continues, but not exactly)."""
    if state["model_config"] != model_cfg.to_dict():
        diff = sorted(k for k, v in model_cfg.to_dict().items() if state["model_config"].get(k) != v)
        raise CheckpointError(
            f"{path}: the checkpoint's model differs from the command's in {', '.join(diff)}; "
            "use a new --save-dir for a different model"
        )
    if vocab_sha256 and state.get("vocab_sha256") not in (None, vocab_sha256):
        raise CheckpointError(f"{path}: trained with a different vocabulary (vocab_sha256 differs)")
    saved = (state.get("admin_profile") or {}).get("omegas")
    if admin_profile is not None and saved is not None and saved != admin_profile.omegas:
        raise CheckpointError(
            f"{path}: the run started with a different Admin profile than {cfg.admin_profile}"
        )
    old = state.get("train_config", {})
    changed = [k for k in TRAJECTORY_KEYS if k in old and old[k] != cfg.to_dict()[k]]
    if changed:
        print(
            f"warning: resuming with changed {', '.join(changed)}: not an exact continuation",
            file=sys.stderr,
        )
