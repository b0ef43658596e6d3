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
from typing import TYPE_CHECKING, Any

from pipeline_lib.checkpoint import LAST
from pipeline_lib.divergence.rule import Verdict
from pipeline_lib.errors import CheckpointError
from pipeline_lib.train.batching import Batch
from pipeline_lib.train.loss import ppl
from pipeline_lib.train.pending_update import JudgedUpdate, PendingUpdate, UpdateInfo
from pipeline_lib.train.progress import LN2, ProgressLines, Tee, open_console, planned_updates, resolve_mode
from pipeline_lib.train.run_log import JsonlLog, Meter, peak_memory_mb
from pipeline_lib.train.run_state import Outcome, StopSignal
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog
from pipeline_lib.train.update import to_device
from pipeline_lib.train.validation import Validation, validate_interval

if TYPE_CHECKING:
    from pipeline_lib.train.trainer import Trainer


class TrainingLoop:
    """One session of a run (a fresh start or a resume): drives the trainer's updates and counters."""

    def __init__(
        self,
        trainer: Trainer,
        train_data: SplitData,
        validation: Validation,
        log: JsonlLog,
        tb: TensorBoardLog,
    ) -> None:
        cfg = trainer.cfg
        self.trainer, self.cfg = trainer, cfg
        self.train_data, self.validation, self.log, self.tb = train_data, validation, log, tb
        self.per_update = trainer.world * cfg.update_freq  # plan entries per update, over all ranks
        self.meter = Meter(time.perf_counter())  # sums of the current log interval
        self.validate_every: int | None = None  # from the first epoch's plan (-1: auto)
        self.mode = resolve_mode(cfg.progress, sys.stderr.isatty()) if trainer.is_main else "none"
        console = open_console(cfg.progress_fd) if self.mode == "lines" else None
        stream = Tee(sys.stderr, console) if console is not None else None
        self.lines = (  # --progress lines
            ProgressLines(cfg.progress_interval, trainer.num_updates, stream)
            if self.mode == "lines"
            else None
        )

    def run(self, stop: StopSignal) -> Outcome:
        t, cfg = self.trainer, self.cfg
        pending: PendingUpdate | None = None
        while not self._done():
            plan = self.train_data.batches(cfg.seed, t.epoch, shuffle=True, multiple_of=t.world)
            if not plan:
                raise CheckpointError(f"{cfg.data}: split {cfg.train_subset!r} yields no batches")
            if t.plan_length is not None and t.plan_length != len(plan) and t.batch_index > 0:
                moved = resume_position(t.batch_index, t.plan_length, len(plan), self.per_update)
                print(
                    f"resuming epoch {t.epoch} on {len(plan)} batches, not the checkpoint's {t.plan_length} "
                    f"(max_tokens or GPUs changed): batch {t.batch_index} -> {moved}, the same share of the epoch",
                    file=sys.stderr,
                )
                t.batch_index = moved
            t.plan_length = len(plan)
            bar = self._progress(len(plan))
            planned = planned_updates(
                t.num_updates, t.batch_index, len(plan), self.per_update, t.epoch,
                cfg.max_epoch, cfg.max_update,
            )  # fmt: skip
            if self.lines is not None:
                self.lines.planned = planned
            if self.validate_every is None:
                self.validate_every = validate_interval(cfg.validate_interval_updates, planned.updates)
            judge = functools.partial(self._judge, plan_length=len(plan), bar=bar)
            while True:
                start = t.batch_index + (pending.update.batches if pending is not None else 0)
                if start >= len(plan) or self._done(pending):
                    break
                chunk = plan[start : start + self.per_update]
                local = [
                    to_device(self.train_data.collate(idx), t.device) for idx in chunk[t.rank :: t.world]
                ]
                total_tokens, stopping = t.ranks.agree(
                    sum(b.ntokens for b in local), stop.received is not None
                )
                update = UpdateInfo(len(chunk), sum(len(idx) for idx in chunk), total_tokens)
                if stopping:
                    outcome = judge(t.updater.conclude(pending)) if pending is not None else None
                    return outcome or self._preempt(bar)
                if not cfg.deferred_stats:
                    outcome = judge(JudgedUpdate(update, *t.train_step(local, total_tokens)))
                else:
                    outcome, pending = self._deferred_update(local, update, pending, judge)
                if outcome is not None:
                    return outcome
            if pending is not None:
                outcome, pending = judge(t.updater.conclude(pending)), None
                if outcome is not None:
                    return outcome
            if bar is not None:
                bar.close()
            if t.batch_index >= len(plan):
                if t.ranks.agree(0.0, stop.received is not None)[1]:
                    return self._preempt(None)
                self._validate()
                t.epoch += 1
                t.batch_index = 0
                t.save(epoch_end=True)
                t.ranks.barrier()
                if self._out_of_patience():
                    return self._early_stop()
        if t.batch_index > 0:  # stopped by --max-update inside an epoch
            self._validate()
            t.save()
        t.ranks.barrier()
        verdict = t.divergence.final_check(t.num_updates)
        if verdict is not None:
            print(f"diverged: {verdict.reason}", file=sys.stderr)
            self.log.write(
                {"kind": "diverged", "update": t.num_updates, "epoch": t.epoch, "reason": verdict.reason}
            )
            return Outcome("diverged", t.num_updates, t.epoch_reached(), verdict.reason, verdict.criterion)
        return Outcome("completed", t.num_updates, t.epoch_reached())

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
        t, updater = self.trainer, self.trainer.updater
        unjudged = pending is not None
        loss_acc, nll_acc = updater.accumulate_gradients(
            local, update.total_tokens, t.num_updates + unjudged, unjudged
        )
        if pending is not None:
            judged = updater.conclude(pending)
            outcome = judge(judged)
            if outcome is not None:
                return outcome, None
            if not judged.stepped:
                loss_acc, nll_acc = updater.replay(local, update.total_tokens, t.num_updates)
        return None, PendingUpdate(update, updater.step_without_reading(loss_acc, nll_acc))

    def _done(self, pending: PendingUpdate | None = None) -> bool:
        t, cfg = self.trainer, self.cfg
        updates = t.num_updates + (pending is not None)  # a pending update has stepped
        return (cfg.max_update > 0 and updates >= cfg.max_update) or (
            cfg.max_epoch > 0 and t.epoch > cfg.max_epoch
        )

    def _judge(self, judged: JudgedUpdate, plan_length: int, bar: Any) -> Outcome | None:
        """One update's bookkeeping, in update order: the divergence verdict, the update count and lr
        schedule, the meter and log, interval checkpoints. Returns the outcome if the run ends here."""
        t, cfg, update = self.trainer, self.cfg, judged.update
        t.batch_index += update.batches
        verdict = t.divergence.check(
            t.num_updates,
            judged.loss_sum / update.total_tokens / LN2,
            judged.nll_sum / update.total_tokens / LN2,
            judged.gnorm,
            t.updater.loss_scale(),
            skipped=not judged.stepped,
        )
        if verdict is not None:
            return self._diverged(verdict, bar)
        if judged.stepped:
            t.num_updates += 1
            t.schedule.step_update(t.num_updates)
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
                t.num_updates, t.epoch, t.schedule.get_lr(),
                judged.loss_sum, judged.nll_sum, update.total_tokens, judged.gnorm,
            )  # fmt: skip
        if t.num_updates % cfg.log_interval == 0:
            self._log_train(bar)
            self.meter = Meter(time.perf_counter())
        if (
            self.validate_every
            and t.num_updates % self.validate_every == 0
            and t.batch_index < plan_length  # an epoch end validates anyway
            and not self._done()  # so does the end of the run
        ):
            self._validate(mid_epoch=True)
            if self._out_of_patience():
                t.save()
                return self._early_stop()
        if (
            cfg.save_interval_updates > 0
            and t.num_updates % cfg.save_interval_updates == 0
            and t.batch_index < plan_length
        ):
            t.save()
        return None

    def _diverged(self, verdict: Verdict, bar: Any) -> Outcome:
        t = self.trainer
        if bar is not None:
            bar.close()
        if verdict.criterion not in ("non_finite", "loss_scale"):
            self._validate()  # the weights are finite: the dev perplexity it stopped at
        print(f"diverged at update {t.num_updates + 1}: {verdict.reason}", file=sys.stderr)
        self.log.write(
            {"kind": "diverged", "update": t.num_updates + 1, "epoch": t.epoch, "reason": verdict.reason}
        )
        return Outcome("diverged", t.num_updates + 1, t.epoch, verdict.reason, verdict.criterion)

    def _preempt(self, bar: Any) -> Outcome:
        t = self.trainer
        if bar is not None:
            bar.close()
        t.save()
        self.log.write({"kind": "preempted", "update": t.num_updates, "epoch": t.epoch})
        print(f"preempted: saved {t.save_dir / LAST} at update {t.num_updates}", file=sys.stderr)
        return Outcome("preempted", t.num_updates, t.epoch, "signal")

    def _validate(self, mid_epoch: bool = False) -> None:
        t = self.trainer
        if self.validation.run(t.epoch, t.num_updates, mid_epoch):
            t.save_best()

    def _out_of_patience(self) -> bool:
        return self.cfg.patience > 0 and self.validation.best.since >= self.cfg.patience

    def _early_stop(self) -> Outcome:
        t, best = self.trainer, self.validation.best
        reason = (
            f"early stop: no lower dev loss in {self.cfg.patience} validations "
            f"(best {best.loss:.3f} at update {best.update})"
        )
        print(reason, file=sys.stderr)
        self.log.write({"kind": "early_stop", "update": t.num_updates, "epoch": t.epoch, "reason": reason})
        return Outcome("completed", t.num_updates, t.epoch_reached(), reason)

    def _progress(self, total: int) -> Any:
        if self.mode != "tqdm":
            return None
        from tqdm import tqdm

        t = self.trainer
        return tqdm(total=total, initial=t.batch_index, desc=f"epoch {t.epoch}", unit="batch", leave=False)

    def _log_train(self, bar: Any) -> None:
        t, meter = self.trainer, self.meter
        if not t.is_main or meter.updates == 0:
            return
        elapsed = max(time.perf_counter() - meter.start, 1e-9)
        memory, memory_kind = peak_memory_mb(t.device)
        loss = meter.loss / meter.tokens / LN2
        nll = meter.nll / meter.tokens / LN2
        record = {
            "kind": "train", "epoch": t.epoch, "update": t.num_updates,
            "loss": loss, "nll_loss": nll, "ppl": ppl(nll), "lr": t.schedule.get_lr(),
            "gnorm": meter.gnorm / meter.updates, "tokens_per_s": meter.tokens / elapsed,
            "updates_per_s": meter.updates / elapsed, "tokens_per_update": meter.tokens / meter.updates,
            "sentences_per_update": meter.sentences / meter.updates, "memory_mb": memory, "memory_kind": memory_kind,
            "time": time.time(),
        }  # fmt: skip
        scale = t.updater.loss_scale()
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
