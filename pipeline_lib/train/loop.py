"""The training loop: epochs of updates until the budget is spent, a stop signal arrives or the run
diverges, with validation and checkpoints at epoch ends and at the configured update intervals.

Each update is judged (divergence, logging, interval checkpoints) by :meth:`TrainingLoop._judge`, in
update order: at once, or with --deferred-stats after the next update's forward and backward have
been queued. The batch plan is a pure function of (seed, epoch), so (epoch, batch index) is all a
checkpoint needs to continue the data where it stopped.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any

from pipeline_lib.divergence.rule import DivergenceMonitor, Verdict
from pipeline_lib.errors import CheckpointError
from pipeline_lib.train.batching import Batch
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.loss import ppl
from pipeline_lib.train.pending_update import JudgedUpdate, PendingUpdate, UpdateInfo
from pipeline_lib.train.position import Position
from pipeline_lib.train.progress import LN2, ProgressLines, Tee, open_console, planned_updates, resolve_mode
from pipeline_lib.train.run_checkpoints import RunSaver
from pipeline_lib.train.run_log import JsonlLog, Meter, peak_memory_mb
from pipeline_lib.train.run_state import Outcome, StopSignal
from pipeline_lib.train.schedule import LrSchedule
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog
from pipeline_lib.train.update import Updater, to_device
from pipeline_lib.train.validation import Validation, validate_interval


class TrainingLoop:
    """One session of a run (a fresh start or a resume): moves the run's position update by update,
    with the updater, the lr schedule, the divergence monitor and the saver it is handed."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        position: Position,
        updater: Updater,
        schedule: LrSchedule,
        divergence: DivergenceMonitor,
        saver: RunSaver,
        train_data: SplitData,
        validation: Validation,
        log: JsonlLog,
        tb: TensorBoardLog,
    ) -> None:
        self.cfg, self.position, self.updater, self.schedule = cfg, position, updater, schedule
        self.divergence, self.saver = divergence, saver
        self.ranks, self.device = updater.ranks, updater.ranks.device
        self.train_data, self.validation, self.log, self.tb = train_data, validation, log, tb
        self.per_update = self.ranks.world * cfg.update_freq  # plan entries per update, over all ranks
        self.meter = Meter(time.perf_counter())  # sums of the current log interval
        self.validate_every: int | None = None  # from the first epoch's plan (-1: auto)
        self.mode = resolve_mode(cfg.progress, sys.stderr.isatty()) if self.ranks.is_main else "none"
        console = open_console(cfg.progress_fd) if self.mode == "lines" else None
        stream = Tee(sys.stderr, console) if console is not None else None
        self.lines = (  # --progress lines
            ProgressLines(cfg.progress_interval, position.num_updates, stream)
            if self.mode == "lines"
            else None
        )

    def run(self, stop: StopSignal) -> Outcome:
        p, cfg = self.position, self.cfg
        pending: PendingUpdate | None = None
        while not self._done():
            plan = self.train_data.batches(cfg.seed, p.epoch, shuffle=True, multiple_of=self.ranks.world)
            if not plan:
                raise CheckpointError(f"{cfg.data}: split {cfg.train_subset!r} yields no batches")
            if p.plan_length is not None and p.plan_length != len(plan) and p.batch_index > 0:
                moved = resume_position(p.batch_index, p.plan_length, len(plan), self.per_update)
                print(
                    f"resuming epoch {p.epoch} on {len(plan)} batches, not the checkpoint's {p.plan_length} "
                    f"(max_tokens or GPUs changed): batch {p.batch_index} -> {moved}, the same share of the epoch",
                    file=sys.stderr,
                )
                p.batch_index = moved
            p.plan_length = len(plan)
            bar = self._progress(len(plan))
            planned = planned_updates(
                p.num_updates, p.batch_index, len(plan), self.per_update, p.epoch,
                cfg.max_epoch, cfg.max_update,
            )  # fmt: skip
            if self.lines is not None:
                self.lines.planned = planned
            if self.validate_every is None:
                self.validate_every = validate_interval(cfg.validate_interval_updates, planned.updates)
            judge = functools.partial(self._judge, plan_length=len(plan), bar=bar)
            while True:
                start = p.batch_index + (pending.update.batches if pending is not None else 0)
                if start >= len(plan) or self._done(pending):
                    break
                chunk = plan[start : start + self.per_update]
                local = [
                    to_device(self.train_data.collate(idx), self.device)
                    for idx in chunk[self.ranks.rank :: self.ranks.world]
                ]
                total_tokens, stopping = self.ranks.agree(
                    sum(b.ntokens for b in local), stop.received is not None
                )
                update = UpdateInfo(len(chunk), sum(len(idx) for idx in chunk), total_tokens)
                if stopping:
                    outcome = judge(self.updater.conclude(pending)) if pending is not None else None
                    return outcome or self._preempt(bar)
                if not cfg.deferred_stats:
                    outcome = judge(
                        JudgedUpdate(update, *self.updater.train_step(local, total_tokens, p.num_updates))
                    )
                else:
                    outcome, pending = self._deferred_update(local, update, pending, judge)
                if outcome is not None:
                    return outcome
            if pending is not None:
                outcome, pending = judge(self.updater.conclude(pending)), None
                if outcome is not None:
                    return outcome
            if bar is not None:
                bar.close()
            if p.batch_index >= len(plan):
                if self.ranks.agree(0.0, stop.received is not None)[1]:
                    return self._preempt(None)
                self._validate()
                p.epoch += 1
                p.batch_index = 0
                self.saver.save(epoch_end=True)
                self.ranks.barrier()
                if self._out_of_patience():
                    return self._early_stop()
        if p.batch_index > 0:  # stopped by --max-update inside an epoch
            self._validate()
            self.saver.save()
        self.ranks.barrier()
        verdict = self.divergence.final_check(p.num_updates)
        if verdict is not None:
            print(f"diverged: {verdict.reason}", file=sys.stderr)
            self.log.write(
                {"kind": "diverged", "update": p.num_updates, "epoch": p.epoch, "reason": verdict.reason}
            )
            return Outcome("diverged", p.num_updates, p.epoch_reached(), verdict.reason, verdict.criterion)
        return Outcome("completed", p.num_updates, p.epoch_reached())

    def _deferred_update(
        self,
        local: list[Batch],
        update: UpdateInfo,
        pending: PendingUpdate | None,
        judge: Callable[[JudgedUpdate], Outcome | None],
    ) -> tuple[Outcome | None, PendingUpdate | None]:
        """--deferred-stats: queue this update's forward and backward, judge the pending one, then step
        this one, unread. The forward/backward is queued as if the pending update stepped (with fp16
        it may not have: then it runs again, with the seed and loss scale that the skip gives it)."""
        p, updater = self.position, self.updater
        unjudged = pending is not None
        loss_acc, nll_acc = updater.accumulate_gradients(
            local, update.total_tokens, p.num_updates + unjudged, unjudged
        )
        if pending is not None:
            judged = updater.conclude(pending)
            outcome = judge(judged)
            if outcome is not None:
                return outcome, None
            if not judged.stepped:
                loss_acc, nll_acc = updater.replay(local, update.total_tokens, p.num_updates)
        return None, PendingUpdate(update, updater.step_without_reading(loss_acc, nll_acc))

    def _done(self, pending: PendingUpdate | None = None) -> bool:
        p, cfg = self.position, self.cfg
        updates = p.num_updates + (pending is not None)  # a pending update has stepped
        return (cfg.max_update > 0 and updates >= cfg.max_update) or (
            cfg.max_epoch > 0 and p.epoch > cfg.max_epoch
        )

    def _judge(self, judged: JudgedUpdate, plan_length: int, bar: Any) -> Outcome | None:
        """One update's bookkeeping, in update order: the divergence verdict, the update count and lr
        schedule, the meter and log, interval checkpoints. Returns the outcome if the run ends here."""
        p, cfg, update = self.position, self.cfg, judged.update
        p.batch_index += update.batches
        verdict = self.divergence.check(
            p.num_updates,
            judged.loss_sum / update.total_tokens / LN2,
            judged.nll_sum / update.total_tokens / LN2,
            judged.gnorm,
            self.updater.loss_scale(),
            skipped=not judged.stepped,
        )
        if verdict is not None:
            return self._diverged(verdict, bar)
        if judged.stepped:
            p.num_updates += 1
            self.schedule.step_update(p.num_updates)
            self.meter.add(
                judged.loss_sum, judged.nll_sum, update.total_tokens, judged.gnorm, update.sentences
            )
        else:
            self.meter.skipped += 1
        if bar is not None:
            bar.update(update.batches)
        if not judged.stepped:
            return None
        if self.lines is not None:
            self.lines.step(
                p.num_updates, p.epoch, self.schedule.get_lr(),
                judged.loss_sum, judged.nll_sum, update.total_tokens, judged.gnorm,
            )  # fmt: skip
        if p.num_updates % cfg.log_interval == 0:
            self._log_train(bar)
            self.meter = Meter(time.perf_counter())
        if (
            self.validate_every
            and p.num_updates % self.validate_every == 0
            and p.batch_index < plan_length  # an epoch end validates anyway
            and not self._done()  # so does the end of the run
        ):
            self._validate(mid_epoch=True)
            if self._out_of_patience():
                self.saver.save()
                return self._early_stop()
        if (
            cfg.save_interval_updates > 0
            and p.num_updates % cfg.save_interval_updates == 0
            and p.batch_index < plan_length
        ):
            self.saver.save()
        return None

    def _diverged(self, verdict: Verdict, bar: Any) -> Outcome:
        p = self.position
        if bar is not None:
            bar.close()
        if verdict.criterion not in ("non_finite", "loss_scale"):
            self._validate()  # the weights are finite: the dev perplexity it stopped at
        print(f"diverged at update {p.num_updates + 1}: {verdict.reason}", file=sys.stderr)
        self.log.write(
            {"kind": "diverged", "update": p.num_updates + 1, "epoch": p.epoch, "reason": verdict.reason}
        )
        return Outcome("diverged", p.num_updates + 1, p.epoch, verdict.reason, verdict.criterion)

    def _preempt(self, bar: Any) -> Outcome:
        p = self.position
        if bar is not None:
            bar.close()
        self.saver.save()
        self.log.write({"kind": "preempted", "update": p.num_updates, "epoch": p.epoch})
        print(f"preempted: saved {self.saver.last} at update {p.num_updates}", file=sys.stderr)
        return Outcome("preempted", p.num_updates, p.epoch, "signal")

    def _validate(self, mid_epoch: bool = False) -> None:
        p = self.position
        if self.validation.run(p.epoch, p.num_updates, mid_epoch):
            self.saver.save_best()

    def _out_of_patience(self) -> bool:
        return self.cfg.patience > 0 and self.validation.best.since >= self.cfg.patience

    def _early_stop(self) -> Outcome:
        p, best = self.position, self.validation.best
        reason = (
            f"early stop: no lower dev loss in {self.cfg.patience} validations "
            f"(best {best.loss:.3f} at update {best.update})"
        )
        print(reason, file=sys.stderr)
        self.log.write({"kind": "early_stop", "update": p.num_updates, "epoch": p.epoch, "reason": reason})
        return Outcome("completed", p.num_updates, p.epoch_reached(), reason)

    def _progress(self, total: int) -> Any:
        if self.mode != "tqdm":
            return None
        from tqdm import tqdm

        p = self.position
        return tqdm(total=total, initial=p.batch_index, desc=f"epoch {p.epoch}", unit="batch", leave=False)

    def _log_train(self, bar: Any) -> None:
        p, meter = self.position, self.meter
        if not self.ranks.is_main or meter.updates == 0:
            return
        elapsed = max(time.perf_counter() - meter.start, 1e-9)
        memory, memory_kind = peak_memory_mb(self.device)
        loss = meter.loss / meter.tokens / LN2
        nll = meter.nll / meter.tokens / LN2
        record = {
            "kind": "train", "epoch": p.epoch, "update": p.num_updates,
            "loss": loss, "nll_loss": nll, "ppl": ppl(nll), "lr": self.schedule.get_lr(),
            "gnorm": meter.gnorm / meter.updates, "tokens_per_s": meter.tokens / elapsed,
            "updates_per_s": meter.updates / elapsed, "tokens_per_update": meter.tokens / meter.updates,
            "sentences_per_update": meter.sentences / meter.updates, "memory_mb": memory, "memory_kind": memory_kind,
            "time": time.time(),
        }  # fmt: skip
        scale = self.updater.loss_scale()
        if scale is not None:
            record["loss_scale"] = scale
            record["overflows"] = meter.skipped
        self.log.write(record)
        self.tb.write(record)
        if bar is not None:
            bar.set_postfix(
                loss=f"{loss:.3f}", lr=f"{record['lr']:.2e}", tok_s=f"{record['tokens_per_s']:.0f}"
            )


def resume_position(batch_index: int, old_length: int, new_length: int, per_update: int) -> int:
    """Where an epoch resumes when its batches were cut differently (another max_tokens or GPU count
    for the same tokens per update): the same share of the epoch, rounded down to a whole update of
    the new plan. The new plan holds other batches in another order, so the rest of this epoch is the
    same amount of data, not the same sentences (some are seen twice in it and as many not at all,
    as when fairseq resumes on another --max-tokens); from the next epoch on, each once again."""
    share = batch_index / old_length
    return min(new_length, int(share * new_length) // per_update * per_update)
