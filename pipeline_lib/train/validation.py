"""The dev-set loss: at an epoch end, at the run's end, at --validate-interval-updates, and at the
update a run diverged at (when its weights are still finite). The last result goes into status.json."""

from __future__ import annotations

import sys

import torch

from pipeline_lib.train.loss import ppl
from pipeline_lib.train.progress import LN2
from pipeline_lib.train.run_log import JsonlLog
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog
from pipeline_lib.train.update import Updater, to_device


@torch.no_grad()
def validate(updater: Updater, data: SplitData, seed: int) -> dict[str, float]:
    """Loss, nll (bits/token) and perplexity over the split, summed over all ranks; no dropout."""
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


class Validation:
    """Validates and records the result: the JSONL log, TensorBoard and a line on stderr (rank 0)."""

    def __init__(
        self, updater: Updater, data: SplitData, seed: int, log: JsonlLog, tb: TensorBoardLog
    ) -> None:
        self.updater, self.data, self.seed, self.log, self.tb = updater, data, seed, log, tb
        self.last: dict[str, float] | None = None  # the latest result, for status.json

    def run(self, epoch: int, update: int, mid_epoch: bool = False) -> None:
        """``mid_epoch`` marks one of --validate-interval-updates (its epoch's end record follows it)."""
        result = validate(self.updater, self.data, self.seed)
        self.last = result
        record = {"kind": "valid", "epoch": epoch, "update": update, **result}
        if mid_epoch:
            record["mid_epoch"] = True
        self.log.write(record)
        self.tb.write(record)
        if self.updater.ranks.is_main:
            print(
                f"epoch {epoch} update {update}: valid loss {result['loss']:.3f} "
                f"nll {result['nll_loss']:.3f} ppl {result['ppl']:.2f}",
                file=sys.stderr,
            )
