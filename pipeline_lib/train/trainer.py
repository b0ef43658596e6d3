"""A training run: token batches, update-freq, AMP, DDP, checkpoints, exact resume, divergence, preemption.

Reproducibility: the model is initialised from ``seed``; before every update the torch RNG (dropout)
is re-seeded from (seed, update, rank), and the batch plan is a pure function of (seed, epoch). A
checkpoint therefore only needs the weights, optimizer/scaler state and the iterator position
(epoch, batch index) to continue bit for bit on CPU; the RNG states are stored too, for completeness.

Outcomes (``status.json`` in the save dir, written by rank 0):
  completed -> exit 0; diverged -> exit 0 (the last good checkpoint is kept, nothing is saved after
  the bad update); preempted (SIGTERM/SIGUSR1) -> checkpoint_last.pt saved, exit EXIT_PREEMPTED (75);
  any exception propagates (non-zero exit) and never writes "diverged".

What a run shows while it runs (rank 0): train_log.jsonl (run_log.py), the same scalars as TensorBoard
event files in {save_dir}/tensorboard/ (tensorboard_log.py), and --progress lines (progress.py).

The jobs, one module each (as fairseq splits trainer.py, checkpoint_utils.py and fairseq_cli/train.py):
build.py (device, model, optimizer, schedule, scaler), update.py (one update), position.py (where the
run is), run_checkpoints.py (which files a save writes and keeps; may a checkpoint be resumed),
validation.py, loop.py (the loop, handed the updater, schedule and saver: it imports nothing of this
module). This class builds a run's parts, saves and restores its state, and starts and concludes it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from torch import Tensor

from pipeline_lib.checkpoint import LAST, newest_readable, remove_stale_temp_files
from pipeline_lib.divergence.rule import UNIGRAM, DivergenceMonitor
from pipeline_lib.model.admin import resolve_profile
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel
from pipeline_lib.run_lock import RunDirLock
from pipeline_lib.train.build import (
    AMP_DTYPES,
    Context,
    build_fp16_master,
    build_optimizer,
    build_scaler,
    build_schedule,
    build_train_model,
    check_cpu_workers,
    select_device,
)
from pipeline_lib.train.collectives import Ranks
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.loop import TrainingLoop
from pipeline_lib.train.position import Position
from pipeline_lib.train.run_checkpoints import RunSaver, check_resumable
from pipeline_lib.train.run_log import LOG_FILE, STATUS_FILE, JsonlLog, read_status, write_status
from pipeline_lib.train.run_state import EXIT_PREEMPTED, Outcome, StopSignal
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog
from pipeline_lib.train.update import Updater
from pipeline_lib.train.validation import BestLoss, Validation

log = logging.getLogger(__name__)

__all__ = ["EXIT_PREEMPTED", "Context", "Outcome", "Trainer"]


class Trainer:
    def __init__(self, cfg: TrainConfig, model_cfg: ModelConfig, ctx: Context, env: DistributedEnv) -> None:
        self.cfg, self.model_cfg, self.ctx, self.env = cfg, model_cfg, ctx, env
        self.save_dir = Path(cfg.save_dir)
        self.device = select_device(cfg, env)
        amp_dtype = AMP_DTYPES[cfg.amp]
        # fp32 CPU training projects and scores the output in token chunks (train/loss.py); on a GPU
        # the whole-logits path (one cuBLAS call, fused softmax kernels) stays, as does AMP and --compile.
        chunked_loss = self.device.type == "cpu" and cfg.amp == "none" and not cfg.compile
        self.ranks = Ranks.of(env, self.device)
        self.world, self.rank, self.is_main = self.ranks.world, self.ranks.rank, self.ranks.is_main
        check_cpu_workers(cfg, model_cfg, self.ranks.distributed)

        self.admin_profile = resolve_profile(model_cfg, cfg.admin_profile, cfg.admin_closed_form)
        self.model: TransformerModel = build_train_model(
            cfg, model_cfg, self.device, self.admin_profile, chunked_loss
        )
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.fp16_master = build_fp16_master(cfg, self.model, self.world)
        self.optimizer = build_optimizer(cfg, self.fp16_master.masters if self.fp16_master else params)
        self.schedule = build_schedule(cfg, self.optimizer)
        self.scaler = build_scaler(cfg, self.device)
        self.updater = Updater(
            cfg, ctx, self.model, params, self.optimizer, self.scaler, self.ranks, amp_dtype, chunked_loss,
            self.fp16_master,
        )  # fmt: skip
        self.position = Position()  # where the run is; the loop moves it
        self.saver = RunSaver(self.state_dict, self.save_dir, cfg, self.position, self.is_main)
        self.divergence = DivergenceMonitor(
            cfg.divergence_threshold,
            cfg.divergence_window,
            cfg.stuck_after,
            fp16=cfg.amp in ("fp16", "fairseq_fp16"),
            fairseq_scaler=self.fp16_master.scaler if self.fp16_master else None,
            min_loss_scale=cfg.min_loss_scale,
        )

    # ----------------------------------------------------------------------------- state
    def _load_data(self) -> tuple[SplitData, SplitData]:
        cfg, ctx = self.cfg, self.ctx
        common = dict(
            bin_dir=cfg.data, src_lang=cfg.source_lang, tgt_lang=cfg.target_lang, max_tokens=cfg.max_tokens,
            max_positions=self.model_cfg.max_positions, max_sentences=cfg.max_sentences,
            pad=ctx.pad, bos=ctx.bos, eos=ctx.eos, pad_to_multiple=cfg.pad_to_multiple,
        )  # fmt: skip
        return SplitData(split=cfg.train_subset, **common), SplitData(split=cfg.valid_subset, **common)

    def state_dict(self) -> dict[str, Any]:
        return {
            "model_config": self.model_cfg.to_dict(),
            "model": self._model_state(),
            "vocab_sha256": self.ctx.vocab_sha256,
            "data": {
                "bin_dir": self.cfg.data,
                "src_lang": self.cfg.source_lang,
                "tgt_lang": self.cfg.target_lang,
            },
            "train_config": self.cfg.to_dict(),
            "num_updates": self.position.num_updates,
            "epoch": self.position.epoch_reached(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.schedule.state_dict(),
            "scaler": (self.fp16_master.scaler if self.fp16_master else self.scaler).state_dict(),
            "iterator": self.position.iterator_state(),
            "trainer": {**self.divergence.state(), "world_size": self.world},
            "admin_profile": self.admin_profile.to_json() if self.admin_profile is not None else None,
            "status": "ok",
        }

    def _model_state(self) -> dict[str, Tensor]:
        """The weights a checkpoint holds: always fp32 (with fairseq_fp16, the master weights)."""
        state = self.model.state_dict()
        return self.fp16_master.fp32_state(state) if self.fp16_master is not None else state

    def load_state_dict(self, state: dict[str, Any], path: Path) -> None:
        check_resumable(state, path, self.cfg, self.model_cfg, self.ctx.vocab_sha256, self.admin_profile)
        self.model.load_state_dict(state["model"])
        if self.fp16_master is not None:
            self.fp16_master.load_fp32_state(state["model"])
            self.fp16_master.scaler.load_state_dict(state["scaler"])
        else:
            self.scaler.load_state_dict(state["scaler"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.position.restore(state["num_updates"], state["iterator"])
        self.schedule.load_state_dict(state["scheduler"])
        self.divergence.restore(state.get("trainer", {}))

    # ----------------------------------------------------------------------------- a run
    def run(self) -> Outcome:
        """The run, holding its save dir (pipeline_lib/run_lock.py): a second trainer on it is refused."""
        lock = RunDirLock.acquire(self.save_dir, "training directory") if self.is_main else None
        try:
            return self._run()
        finally:
            if lock is not None:
                lock.release()

    def _run(self) -> Outcome:
        cfg = self.cfg
        if self.is_main:
            self.save_dir.mkdir(parents=True, exist_ok=True)
        status = read_status(self.save_dir)
        if status is not None and status.get("status") == "diverged":
            print(
                f"{self.save_dir / STATUS_FILE}: this run diverged at update {status.get('update')} "
                f"({status.get('reason')}); not retrying (delete status.json to force a retry)",
                file=sys.stderr,
            )
            return Outcome(
                "diverged", int(status.get("update", 0)), int(status.get("epoch", 0)), status.get("reason")
            )
        if self.is_main:
            remove_stale_temp_files(self.save_dir)
        self.ranks.barrier()  # nobody reads status.json after rank 0 rewrites it below
        train_data, valid_data = self._load_data()
        self.divergence.set_threshold(
            self.ctx.vocab_size, train_data.corpus.tgt, self.model_cfg.tgt_vocab_size, train_data.eos
        )
        if cfg.divergence_threshold == UNIGRAM:
            log.info(
                "divergence threshold: the training targets' unigram entropy, %.3f bits/token",
                self.divergence.threshold,
            )
        run_log = JsonlLog(self.save_dir / LOG_FILE, self.is_main)
        found = newest_readable(self.save_dir)
        if found is not None:
            state, path = found
            self.load_state_dict(state, path)
            pos = self.position
            run_log.truncate_after(pos.num_updates)
            run_log.write(
                {"kind": "resume", "update": pos.num_updates, "epoch": pos.epoch, "checkpoint": str(path)}
            )
            print(
                f"resuming from {path}: update {pos.num_updates}, epoch {pos.epoch}, batch {pos.batch_index}",
                file=sys.stderr,
            )
        elif self.is_main:
            run_log.reset()
            run_log.write({
                "kind": "start", "update": 0, "model": self.model_cfg.to_dict(), "train": cfg.to_dict(),
                "parameters": self.model.num_parameters(), "world_size": self.world,
                "train_pairs": len(train_data), "train_skipped": train_data.dropped, "valid_pairs": len(valid_data),
            })  # fmt: skip
        resumed_at = self.position.num_updates if found is not None else None
        tb = TensorBoardLog(self.save_dir, self.is_main, resume_update=resumed_at)
        if self.is_main and status is not None and status.get("status") == "preempted":
            (self.save_dir / STATUS_FILE).unlink(missing_ok=True)
        self.updater.wrap_ddp()
        best = (
            BestLoss.from_records(run_log.records(self.position.num_updates)) if found is not None else None
        )
        validation = Validation(self.updater, valid_data, cfg.seed, run_log, tb, best)
        try:
            with StopSignal() as stop:
                loop = TrainingLoop(
                    cfg, position=self.position, updater=self.updater, schedule=self.schedule,
                    divergence=self.divergence, saver=self.saver, train_data=train_data,
                    validation=validation, log=run_log, tb=tb,
                )  # fmt: skip
                outcome = loop.run(stop)
        finally:
            run_log.close()
            tb.close()
        if self.is_main:
            extra = {
                "valid": validation.last,
                "best": validation.best.to_json(),
                "checkpoint": str(self.save_dir / LAST),
                "divergence_threshold_bits": self.divergence.threshold,
            }
            write_status(self.save_dir, outcome, extra)
        self.ranks.barrier()
        return outcome
