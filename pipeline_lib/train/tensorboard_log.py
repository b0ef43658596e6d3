"""TensorBoard event files beside the checkpoints: ``{save_dir}/tensorboard/``, so
``tensorboard --logdir <workdir>/experiments`` shows every run of a config side by side.

The scalars are the JSONL log's own records (the same values at the same updates), written by rank 0.
A resumed run marks its restart with ``purge_step`` = the checkpoint's update + 1: TensorBoard's
readers (both of ``tensorboard``'s loaders) then drop the earlier attempt's points after the
checkpoint, which the resumed run redoes (the JSONL log is truncated at the same place). A fresh start
removes an earlier attempt's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TB_DIR = "tensorboard"
EVENT_GLOB = "events.out.tfevents.*"

# JSONL record key -> TensorBoard tag, per record kind (losses in bits per target token).
TRAIN_TAGS = {
    "loss": "train/loss",
    "nll_loss": "train/nll_loss",
    "ppl": "train/ppl",
    "lr": "train/lr",
    "gnorm": "train/gnorm",
    "loss_scale": "train/loss_scale",  # fp16 only
    "tokens_per_s": "train/tokens_per_s",
    "updates_per_s": "train/updates_per_s",
}
VALID_TAGS = {"loss": "valid/loss", "nll_loss": "valid/nll_loss", "ppl": "valid/ppl"}


class TensorBoardLog:
    def __init__(self, save_dir: Path, enabled: bool, resume_update: int | None) -> None:
        """``resume_update``: the update of the checkpoint the run resumes from (None: a fresh start)."""
        self.writer: Any = None
        if not enabled:
            return
        from torch.utils.tensorboard import SummaryWriter  # imports tensorboard (~1 s): rank 0 only

        log_dir = Path(save_dir) / TB_DIR
        if resume_update is None:
            for old in log_dir.glob(EVENT_GLOB):
                old.unlink()
        # Every session opens with a restart mark, a fresh one included: the reader `tensorboard
        # --load_fast=false` takes a log's first mark for its start and purges only at later ones.
        purge_step = 0 if resume_update is None else resume_update + 1
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step, flush_secs=30)

    def write(self, record: dict[str, Any]) -> None:
        """A JSONL record: ``train`` and ``valid`` ones become scalars at their update."""
        if self.writer is None:
            return
        tags = {"train": TRAIN_TAGS, "valid": VALID_TAGS}.get(record.get("kind", ""))
        if tags is None:
            return
        step = int(record["update"])
        for key, tag in tags.items():
            if record.get(key) is not None:
                self.writer.add_scalar(tag, float(record[key]), step)
        if record["kind"] == "valid":
            self.writer.flush()  # a dev point is worth seeing at once

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
