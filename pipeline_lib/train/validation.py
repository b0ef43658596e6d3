"""The dev-set loss: at an epoch end, at the run's end, at --validate-interval-updates, and at the
update a run diverged at (when its weights are still finite). The last result goes into status.json.

The best dev loss so far (fairseq's ``best_checkpoint_metric`` "loss") decides ``checkpoint_best.pt``
and, with --patience, early stopping. It is rebuilt on resume from ``train_log.jsonl``, which the
trainer has cut back to the checkpoint's update, so a resumed run counts exactly as an unbroken one.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from pipeline_lib.train.loss import ppl
from pipeline_lib.train.progress import LN2
from pipeline_lib.train.run_log import JsonlLog
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog
from pipeline_lib.train.update import Updater, to_device


def validate(updater: Updater, data: SplitData, seed: int) -> dict[str, float]:
    """Loss, nll (bits/token) and perplexity over the split, summed over all ranks; no dropout."""
    with torch.no_grad():
        ranks = updater.ranks
        updater.model.eval()
        plan = data.batches(seed, 0, shuffle=False)
        sums = torch.zeros(2, dtype=torch.float64, device=ranks.device)  # read once, at the end
        ntokens = 0.0
        for indices in plan[ranks.rank :: ranks.world]:
            batch = to_device(data.collate(indices), ranks.device)
            loss, nll = updater.forward_loss(batch, updater.model)
            sums += torch.stack([loss.detach().double(), nll.detach().double()])
            ntokens += batch.ntokens
        loss_sum, nll_sum, ntokens = ranks.all_reduce([*sums.tolist(), ntokens])
        denom = max(ntokens, 1.0) * LN2
        return {
            "loss": loss_sum / denom,
            "nll_loss": nll_sum / denom,
            "ppl": ppl(nll_sum / denom),
            "ntokens": ntokens,
        }


AUTO_POINTS = 10  # --validate-interval-updates -1: about this many dev points over the planned run


def validate_interval(setting: int, planned_updates: int) -> int:
    """Updates between mid-epoch validations (0: only at epoch ends); -1 spreads ``AUTO_POINTS``."""
    if setting >= 0:
        return setting
    return max(1, math.ceil(planned_updates / AUTO_POINTS))


@dataclass
class BestLoss:
    """The lowest dev loss so far, where it was reached, and the validations since without a better one."""

    loss: float = math.inf
    update: int = 0
    epoch: int = 0
    since: int = 0

    def add(self, loss: float, update: int, epoch: int) -> bool:
        """Count one validation; True if it is a new best (fairseq: strictly lower)."""
        if loss < self.loss:
            self.loss, self.update, self.epoch, self.since = loss, update, epoch, 0
            return True
        self.since += 1
        return False

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> BestLoss:
        best = cls()
        for record in records:
            if record.get("kind") == "valid" and math.isfinite(record.get("loss", math.nan)):
                best.add(record["loss"], record["update"], record["epoch"])
        return best

    def to_json(self) -> dict[str, Any] | None:
        if not math.isfinite(self.loss):
            return None
        return {"loss": self.loss, "update": self.update, "epoch": self.epoch}


class Validation:
    """Validates and records the result: the JSONL log, TensorBoard and a line on stderr (rank 0)."""

    def __init__(
        self,
        updater: Updater,
        data: SplitData,
        seed: int,
        log: JsonlLog,
        tb: TensorBoardLog,
        best: BestLoss | None = None,
    ) -> None:
        self.updater, self.data, self.seed, self.log, self.tb = updater, data, seed, log, tb
        self.last: dict[str, float] | None = None  # the latest result, for status.json
        self.best = best if best is not None else BestLoss()

    def run(self, epoch: int, update: int, mid_epoch: bool = False) -> bool:
        """``mid_epoch`` marks one of --validate-interval-updates (its epoch's end record follows it).
        Returns whether the dev loss is the best so far (all ranks agree: the loss is all-reduced)."""
        result = validate(self.updater, self.data, self.seed)
        self.last = result
        improved = math.isfinite(result["loss"]) and self.best.add(result["loss"], update, epoch)
        record = {"kind": "valid", "epoch": epoch, "update": update, **result}
        if mid_epoch:
            record["mid_epoch"] = True
        self.log.write(record)
        self.tb.write(record)
        if self.updater.ranks.is_main:
            print(
                f"epoch {epoch} update {update}: valid loss {result['loss']:.3f} "
                f"nll {result['nll_loss']:.3f} ppl {result['ppl']:.2f}" + (" (best)" if improved else ""),
                file=sys.stderr,
            )
        return improved
