"""The training loop: token batches, update-freq, AMP, DDP, checkpoints, exact resume, divergence, preemption.

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
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as torch_dist
from torch import Tensor, nn

from pipeline_lib.checkpoint import (
    LAST,
    copy_checkpoint,
    epoch_path,
    interval_path,
    newest_readable,
    prune_epochs,
    prune_intervals,
    remove_stale_temp_files,
    save_checkpoint,
)
from pipeline_lib.cpu.onednn import resolve_cpu_gemm, set_cpu_gemm, uses_onednn
from pipeline_lib.cpu.threads import single_intra_op_thread
from pipeline_lib.cpu.weight_grad_sharing import run_micro_batches
from pipeline_lib.errors import CheckpointError, ConfigError
from pipeline_lib.model.admin import apply_profile, resolve_profile
from pipeline_lib.model.attention import avoid_cudnn_attention
from pipeline_lib.model.compile import compile_layers
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.dropout import dropout_generator
from pipeline_lib.model.transformer import TransformerModel, build_model
from pipeline_lib.train.batching import Batch
from pipeline_lib.train.config import TRAJECTORY_KEYS, TrainConfig
from pipeline_lib.train.distributed_env import DistributedEnv
from pipeline_lib.train.divergence import UNIGRAM, DivergenceMonitor, Verdict
from pipeline_lib.train.loss import label_smoothed_nll_loss, output_layer_loss, ppl
from pipeline_lib.train.pending_update import HostStats, JudgedUpdate, PendingUpdate, UpdateInfo
from pipeline_lib.train.progress import ProgressLines, Tee, open_console, planned_updates, resolve_mode
from pipeline_lib.train.run_log import (
    LOG_FILE,
    STATUS_FILE,
    JsonlLog,
    Meter,
    peak_memory_mb,
    read_status,
    write_status,
)
from pipeline_lib.train.run_state import (
    EXIT_PREEMPTED,
    Outcome,
    StopSignal,
    update_seed,
)
from pipeline_lib.train.schedule import LrSchedule
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog

log = logging.getLogger(__name__)

__all__ = ["EXIT_PREEMPTED", "Context", "Outcome", "Trainer"]
LN2 = math.log(2.0)


@dataclass
class Context:
    """What the trainer needs to know about its data besides the config."""

    vocab_size: int
    vocab_sha256: str | None
    pad: int = 0
    bos: int = 1
    eos: int = 2


def keep_layernorm_fp32(model: nn.Module) -> None:
    """Under autocast, feed LayerNorm fp32 input so it computes and returns fp32 (CUDA autocast does this
    already; CPU autocast would return bf16). The residual stream then stays fp32 between sub-layers."""

    def to_fp32(_module: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return (args[0].float(), *args[1:])

    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.register_forward_pre_hook(to_fp32)


class Trainer:
    def __init__(self, cfg: TrainConfig, model_cfg: ModelConfig, ctx: Context, env: DistributedEnv) -> None:
        self.cfg, self.model_cfg, self.ctx, self.env = cfg, model_cfg, ctx, env
        self.save_dir = Path(cfg.save_dir)
        if cfg.device == "cuda":
            if not torch.cuda.is_available():
                raise CheckpointError("--device cuda was given but torch sees no CUDA device")
            self.device = torch.device("cuda", env.local_rank)
            torch.cuda.set_device(self.device)
            avoid_cudnn_attention()
        else:
            self.device = torch.device("cpu")
        self.amp_dtype = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.amp]
        # fp32 CPU training projects and scores the output in token chunks (train/loss.py); on a GPU
        # the whole-logits path (one cuBLAS call, fused softmax kernels) stays, as does AMP and --compile.
        self.chunked_loss = self.device.type == "cpu" and self.amp_dtype is None and not cfg.compile
        self.distributed = env.is_distributed and torch_dist.is_available() and torch_dist.is_initialized()
        self.world = env.world_size if self.distributed else 1
        self.rank = env.rank if self.distributed else 0
        self.is_main = self.rank == 0
        if cfg.cpu_workers > 1 and self.distributed:
            raise ConfigError(
                "--cpu-workers > 1 runs one process; it does not combine with torchrun/srun ranks"
            )
        if cfg.cpu_workers > 1 and model_cfg.attention_dropout > 0:
            # attention dropout happens inside scaled_dot_product_attention, on the global generator
            raise ConfigError("--cpu-workers > 1 needs --attention-dropout 0 (reproducible masks)")

        self.admin_profile = resolve_profile(self.model_cfg, cfg.admin_profile, cfg.admin_closed_form)
        torch.manual_seed(cfg.seed)
        self.model: TransformerModel = build_model(model_cfg)
        self.model.set_activation_checkpointing(cfg.checkpoint_activations)
        if self.admin_profile is not None:
            apply_profile(self.model, self.admin_profile)
        self.model.to(self.device)
        if self.amp_dtype is not None:
            keep_layernorm_fp32(self.model)
        if cfg.compile:
            log.info("torch.compile: %d layers", compile_layers(self.model))
        if self.chunked_loss:  # fp32 on a CPU
            gemm = resolve_cpu_gemm(cfg.cpu_gemm, model_cfg.d_model, cfg.max_tokens)
            set_cpu_gemm(self.model, gemm)
            log.info("fp32 CPU matmuls: %s", gemm)
        # Master weights stay fp32 whatever the AMP mode: autocast only casts activations.
        assert all(p.dtype == torch.float32 for p in self.model.parameters())
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        optim_cls = torch.optim.RAdam if cfg.optimizer == "radam" else torch.optim.Adam
        self.optimizer = optim_cls(
            self.params,
            lr=cfg.warmup_init_lr,
            betas=cfg.adam_betas,
            eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay,
            # Adam: one fused pass per parameter (CUDA and CPU; GradScaler-aware), 3x faster than
            # foreach on CPU, where foreach is a loop of per-tensor ops. RAdam has no fused kernel.
            **({"fused": True} if optim_cls is torch.optim.Adam else {"foreach": True}),
        )
        self.schedule = LrSchedule(
            self.optimizer,
            cfg.lr,
            cfg.warmup_updates,
            cfg.warmup_init_lr,
            decay=cfg.lr_scheduler,
            max_update=cfg.max_update,
        )
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.amp == "fp16")
        self.num_updates = 0
        self.epoch = 1
        self.batch_index = 0
        self.divergence = DivergenceMonitor(
            cfg.divergence_threshold, cfg.divergence_window, cfg.stuck_after, fp16=cfg.amp == "fp16"
        )
        self.ddp: nn.Module = self.model
        self.tb = TensorBoardLog(self.save_dir, enabled=False, resume_update=None)  # run() opens it
        self.lines: ProgressLines | None = None  # --progress lines; set by _loop

    # ----------------------------------------------------------------------------- setup
    def _load_data(self) -> tuple[SplitData, SplitData]:
        cfg, ctx = self.cfg, self.ctx
        common = dict(
            bin_dir=cfg.data, src_lang=cfg.source_lang, tgt_lang=cfg.target_lang, max_tokens=cfg.max_tokens,
            max_positions=self.model_cfg.max_positions, max_sentences=cfg.max_sentences,
            pad=ctx.pad, bos=ctx.bos, eos=ctx.eos, pad_to_multiple=cfg.pad_to_multiple,
        )  # fmt: skip
        return SplitData(split=cfg.train_subset, **common), SplitData(split=cfg.valid_subset, **common)

    # ----------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "model_config": self.model_cfg.to_dict(),
            "model": self.model.state_dict(),
            "vocab_sha256": self.ctx.vocab_sha256,
            "data": {
                "bin_dir": self.cfg.data,
                "src_lang": self.cfg.source_lang,
                "tgt_lang": self.cfg.target_lang,
            },
            "train_config": self.cfg.to_dict(),
            "num_updates": self.num_updates,
            "epoch": self._epoch_reached(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(),
            "iterator": {"epoch": self.epoch, "batch_index": self.batch_index},
            "trainer": {**self.divergence.state(), "world_size": self.world},
            "admin_profile": self.admin_profile.to_json() if self.admin_profile is not None else None,
            "status": "ok",
        }

    def save(self, epoch_end: bool = False) -> None:
        """checkpoint_last.pt always; checkpoint{epoch}.pt at an epoch end; interval files when asked."""
        if not self.is_main:
            return
        state = self.state_dict()
        cfg = self.cfg
        if epoch_end:
            finished = self.epoch - 1
            path = epoch_path(self.save_dir, finished)
            save_checkpoint(state, path)
            copy_checkpoint(path, self.save_dir / LAST)
            prune_epochs(self.save_dir, finished, cfg.keep_last_epochs)
            return
        if cfg.keep_interval_updates > 0:
            path = interval_path(self.save_dir, self.epoch, self.num_updates)
            save_checkpoint(state, path)
            copy_checkpoint(path, self.save_dir / LAST)
            prune_intervals(self.save_dir, cfg.keep_interval_updates)
        else:
            save_checkpoint(state, self.save_dir / LAST)

    def _restore(self, state: dict[str, Any], path: Path) -> None:
        if state["model_config"] != self.model_cfg.to_dict():
            diff = sorted(k for k, v in self.model_cfg.to_dict().items() if state["model_config"].get(k) != v)
            raise CheckpointError(
                f"{path}: the checkpoint's model differs from the command's in {', '.join(diff)}; "
                "use a new --save-dir for a different model"
            )
        if self.ctx.vocab_sha256 and state.get("vocab_sha256") not in (None, self.ctx.vocab_sha256):
            raise CheckpointError(f"{path}: trained with a different vocabulary (vocab_sha256 differs)")
        saved = (state.get("admin_profile") or {}).get("omegas")
        if self.admin_profile is not None and saved is not None and saved != self.admin_profile.omegas:
            raise CheckpointError(
                f"{path}: the run started with a different Admin profile than {self.cfg.admin_profile}"
            )
        old = state.get("train_config", {})
        changed = [k for k in TRAJECTORY_KEYS if k in old and old[k] != self.cfg.to_dict()[k]]
        if changed:
            print(
                f"warning: resuming with changed {', '.join(changed)}: not an exact continuation",
                file=sys.stderr,
            )
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.num_updates = int(state["num_updates"])
        self.schedule.load_state_dict(state["scheduler"])
        self.epoch = int(state["iterator"]["epoch"])
        self.batch_index = int(state["iterator"]["batch_index"])
        self.divergence.restore(state.get("trainer", {}))

    # ----------------------------------------------------------------------------- collectives
    def _all_reduce(self, values: list[float]) -> list[float]:
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.distributed:
            torch_dist.all_reduce(tensor)
        return tensor.tolist()

    def _barrier(self) -> None:
        if self.distributed:
            torch_dist.barrier()

    # ----------------------------------------------------------------------------- steps
    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def accumulate_gradients(
        self, batches: list[Batch], total_tokens: float, update: int | None = None
    ) -> tuple[Tensor, Tensor]:
        """Forward/backward over this rank's micro-batches; leaves per-target-token gradients in .grad.
        Returns this rank's (loss_sum, nll_sum) in nats. ``update`` (default: the updates done) seeds
        dropout; with --deferred-stats it counts the update still being judged."""
        update = self.num_updates if update is None else update
        torch.manual_seed(update_seed(self.cfg.seed, update, self.rank))
        self.ddp.train()
        # DDP averages gradients over ranks; fairseq's normalisation is per target token of the update.
        scale = self.world / total_tokens
        if self.cfg.cpu_workers > 1:
            return self._accumulate_in_threads(batches, scale, update)
        loss_acc = torch.zeros((), device=self.device)
        nll_acc = torch.zeros((), device=self.device)
        for i, batch in enumerate(batches):
            sync = not self.distributed or i == len(batches) - 1
            with (
                contextlib.nullcontext() if sync else self.ddp.no_sync(),
                dropout_generator(self._micro_batch_generator(update, i)),
            ):
                loss, nll = self._forward_loss(batch)
                self.scaler.scale(loss * scale).backward()
            loss_acc += loss.detach()
            nll_acc += nll.detach()
        return loss_acc, nll_acc

    def _micro_batch_generator(self, update: int, index: int) -> torch.Generator | None:
        """CPU: dropout masks from (seed, update, rank, micro-batch) alone, whichever thread runs it.
        CUDA keeps the global generator and ATen's fused dropout kernel."""
        if self.device.type != "cpu" or self.cfg.compile:  # compiled dropout has its own RNG
            return None
        seed = update_seed(self.cfg.seed, update, (self.rank + 1) * 100_003 + index)
        return torch.Generator().manual_seed(seed)

    def _forward_loss(self, batch: Batch, module: nn.Module | None = None) -> tuple[Tensor, Tensor]:
        """(loss_sum, nll_sum) of one batch through ``module`` (default: the DDP wrapper)."""
        module = module or self.ddp
        if self.chunked_loss:
            hidden = module(batch.src_tokens, batch.prev_tokens, features_only=True)
            # the output layer's product runs inside the loss, on the library set_cpu_gemm chose for it
            out = self.model.output_projection
            return output_layer_loss(
                hidden,
                out.weight,
                batch.target,
                self.cfg.label_smoothing,
                self.ctx.pad,
                onednn=uses_onednn(out),
            )
        with self._autocast():
            logits = module(batch.src_tokens, batch.prev_tokens)
        return label_smoothed_nll_loss(logits, batch.target, self.cfg.label_smoothing, self.ctx.pad)

    def _accumulate_in_threads(
        self, batches: list[Batch], scale: float, update: int
    ) -> tuple[Tensor, Tensor]:
        """--cpu-workers: micro-batches side by side, one intra-op thread each; their gradients are
        summed in micro-batch order, as sequential backward() calls would accumulate them. The oneDNN
        layers' weight-gradient products go to queues that an idle worker helps empty
        (``weight_grad_sharing``)."""

        def micro_batch(i: int) -> tuple[Tensor, Tensor, tuple[Tensor | None, ...]]:
            with dropout_generator(self._micro_batch_generator(update, i)):
                loss, nll = self._forward_loss(batches[i])
                grads = torch.autograd.grad(loss * scale, self.params, allow_unused=True)
            return loss.detach(), nll.detach(), grads

        with single_intra_op_thread():
            results, shared = run_micro_batches(len(batches), self.cfg.cpu_workers, micro_batch)
        loss_acc = torch.zeros((), device=self.device)
        nll_acc = torch.zeros((), device=self.device)
        for i, (loss, nll, autograd_grads) in enumerate(results):
            grads = shared.complete(i, self.params, autograd_grads)
            for param, grad in zip(self.params, grads, strict=True):
                if grad is None:
                    continue
                if param.grad is None:
                    param.grad = grad
                else:
                    param.grad += grad
            loss_acc += loss
            nll_acc += nll
        return loss_acc, nll_acc

    def _unscale_and_clip(self, loss_acc: Tensor, nll_acc: Tensor) -> Tensor:
        """Unscaled, clipped gradients in .grad; returns [loss_sum, nll_sum, gnorm] (float64, on the
        device), the sums over all ranks. The norm is the same on every rank after DDP's all-reduce."""
        self.scaler.unscale_(self.optimizer)
        grads = [p.grad for p in self.params if p.grad is not None]
        gnorm = torch.nn.utils.get_total_norm(grads, foreach=True)
        if self.cfg.clip_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(self.params, self.cfg.clip_norm, gnorm, foreach=True)
        stats = torch.stack([loss_acc.double(), nll_acc.double()])
        if self.distributed:
            torch_dist.all_reduce(stats)
        return torch.cat([stats, gnorm.double().reshape(1)])

    def step_without_reading(self, loss_acc: Tensor, nll_acc: Tensor) -> HostStats:
        """--deferred-stats: the optimizer step, with the statistics left for later. The step is not
        gated on finite values: without fp16, a non-finite update is a divergence, which ends the run
        when it is read, one update later, before anything is saved or validated."""
        stats = self._unscale_and_clip(loss_acc, nll_acc)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return HostStats.copy_from(stats)

    def train_step(self, batches: list[Batch], total_tokens: float) -> tuple[float, float, float, bool]:
        """One update. Returns (loss_sum, nll_sum, gnorm, stepped), sums over all ranks in nats;
        ``stepped`` is False when the step was skipped (fp16 overflow, non-finite values)."""
        loss_acc, nll_acc = self.accumulate_gradients(batches, total_tokens)
        loss_sum, nll_sum, gnorm_value = self._unscale_and_clip(loss_acc, nll_acc).tolist()
        stepped = True
        if self.cfg.amp == "fp16":
            before = self.scaler.get_scale()
            self.scaler.step(self.optimizer)  # skips the step on inf/nan gradients
            self.scaler.update()
            stepped = self.scaler.get_scale() >= before
        elif math.isfinite(loss_sum) and math.isfinite(gnorm_value):
            self.optimizer.step()
        else:
            stepped = False
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, nll_sum, gnorm_value, stepped

    @torch.no_grad()
    def validate(self, data: SplitData) -> dict[str, float]:
        self.model.eval()
        plan = data.batches(self.cfg.seed, 0, shuffle=False)
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)  # read once, at the end
        ntokens = 0.0
        for indices in plan[self.rank :: self.world]:
            batch = self._to_device(data.collate(indices))
            loss, nll = self._forward_loss(batch, self.model)
            sums += torch.stack([loss.detach().double(), nll.detach().double()])
            ntokens += batch.ntokens
        loss_sum, nll_sum, ntokens = self._all_reduce([*sums.tolist(), ntokens])
        denom = max(ntokens, 1.0) * LN2
        return {
            "loss": loss_sum / denom,
            "nll_loss": nll_sum / denom,
            "ppl": ppl(nll_sum / denom),
            "ntokens": ntokens,
        }

    # ----------------------------------------------------------------------------- main loop
    def run(self) -> Outcome:
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
        self._barrier()  # nobody reads status.json after rank 0 rewrites it below
        train_data, valid_data = self._load_data()
        self.divergence.set_threshold(
            self.ctx.vocab_size, train_data.corpus.tgt, self.model_cfg.tgt_vocab_size, train_data.eos
        )
        if self.cfg.divergence_threshold == UNIGRAM:
            log.info(
                "divergence threshold: the training targets' unigram entropy, %.3f bits/token",
                self.divergence.threshold,
            )
        self.log = JsonlLog(self.save_dir / LOG_FILE, self.is_main)
        found = newest_readable(self.save_dir)
        if found is not None:
            state, path = found
            self._restore(state, path)
            self.log.truncate_after(self.num_updates)
            self.log.write(
                {"kind": "resume", "update": self.num_updates, "epoch": self.epoch, "checkpoint": str(path)}
            )
            print(
                f"resuming from {path}: update {self.num_updates}, epoch {self.epoch}, batch {self.batch_index}",
                file=sys.stderr,
            )
        elif self.is_main:
            self.log.reset()
            self.log.write({
                "kind": "start", "update": 0, "model": self.model_cfg.to_dict(), "train": cfg.to_dict(),
                "parameters": self.model.num_parameters(), "world_size": self.world,
                "train_pairs": len(train_data), "train_skipped": train_data.dropped, "valid_pairs": len(valid_data),
            })  # fmt: skip
        resumed_at = self.num_updates if found is not None else None
        self.tb = TensorBoardLog(self.save_dir, self.is_main, resume_update=resumed_at)
        if self.is_main and status is not None and status.get("status") == "preempted":
            (self.save_dir / STATUS_FILE).unlink(missing_ok=True)
        self.wrap_ddp()
        try:
            with StopSignal() as stop:
                outcome = self._loop(train_data, valid_data, stop)
        finally:
            self.log.close()
            self.tb.close()
        if self.is_main:
            extra = {
                "valid": getattr(self, "last_valid", None),
                "checkpoint": str(self.save_dir / LAST),
                "divergence_threshold_bits": self.divergence.threshold,
            }
            write_status(self.save_dir, outcome, extra)
        self._barrier()
        return outcome

    def _epoch_reached(self) -> int:
        """The epoch in progress, or the last finished one when sitting at an epoch boundary."""
        return self.epoch - 1 if self.batch_index == 0 else self.epoch

    def wrap_ddp(self) -> None:
        if self.distributed and self.ddp is self.model:
            self.ddp = nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                broadcast_buffers=False,
                gradient_as_bucket_view=True,
            )

    def _done(self, pending: PendingUpdate | None = None) -> bool:
        cfg = self.cfg
        updates = self.num_updates + (pending is not None)  # a pending update has stepped
        return (cfg.max_update > 0 and updates >= cfg.max_update) or (
            cfg.max_epoch > 0 and self.epoch > cfg.max_epoch
        )

    def _to_device(self, batch: Batch) -> Batch:
        if self.device.type == "cuda":
            batch = batch.pin_memory()  # an asynchronous copy, which pageable memory cannot have
        return batch.to(self.device)

    def _agree(self, ntokens: float, stopping: bool) -> tuple[float, bool]:
        """The update's target tokens over all ranks, and whether any rank got a stop signal. One
        process needs no collective (and no device round trip)."""
        if not self.distributed:
            return ntokens, stopping
        total, votes = self._all_reduce([ntokens, float(stopping)])
        return total, votes > 0

    def _loop(self, train_data: SplitData, valid_data: SplitData, stop: StopSignal) -> Outcome:
        """Each update is judged (divergence, logging, interval checkpoints) by ``_judge``: at once, or
        with --deferred-stats after the next update's forward and backward have been queued."""
        cfg = self.cfg
        per_update = self.world * cfg.update_freq
        self.meter = Meter(time.perf_counter())
        mode = resolve_mode(cfg.progress, sys.stderr.isatty()) if self.is_main else "none"
        console = open_console(cfg.progress_fd) if mode == "lines" else None
        stream = Tee(sys.stderr, console) if console is not None else None
        self.lines = (
            ProgressLines(cfg.progress_interval, self.num_updates, stream) if mode == "lines" else None
        )
        pending: PendingUpdate | None = None
        while not self._done():
            plan = train_data.batches(cfg.seed, self.epoch, shuffle=True, multiple_of=self.world)
            if not plan:
                raise CheckpointError(f"{cfg.data}: split {cfg.train_subset!r} yields no batches")
            bar = self._progress(len(plan), mode)
            if self.lines is not None:
                self.lines.planned = planned_updates(
                    self.num_updates, self.batch_index, len(plan), per_update, self.epoch,
                    cfg.max_epoch, cfg.max_update,
                )  # fmt: skip
            judge = functools.partial(self._judge, plan_length=len(plan), bar=bar, valid_data=valid_data)
            while True:
                start = self.batch_index + (pending.update.batches if pending is not None else 0)
                if start >= len(plan) or self._done(pending):
                    break
                chunk = plan[start : start + per_update]
                local = [self._to_device(train_data.collate(idx)) for idx in chunk[self.rank :: self.world]]
                total_tokens, stopping = self._agree(sum(b.ntokens for b in local), stop.received is not None)
                update = UpdateInfo(len(chunk), sum(len(idx) for idx in chunk), total_tokens)
                if stopping:
                    outcome = judge(pending.read()) if pending is not None else None
                    return outcome or self._preempt(bar)
                if not cfg.deferred_stats:
                    outcome = judge(JudgedUpdate(update, *self.train_step(local, total_tokens)))
                else:
                    loss_acc, nll_acc = self.accumulate_gradients(
                        local, total_tokens, self.num_updates + (pending is not None)
                    )
                    outcome = judge(pending.read()) if pending is not None else None
                    pending = PendingUpdate(update, self.step_without_reading(loss_acc, nll_acc))
                if outcome is not None:
                    return outcome
            if pending is not None:
                outcome, pending = judge(pending.read()), None
                if outcome is not None:
                    return outcome
            if bar is not None:
                bar.close()
            if self.batch_index >= len(plan):
                if self._agree(0.0, stop.received is not None)[1]:
                    return self._preempt(None)
                self._validate_and_log(valid_data)
                self.epoch += 1
                self.batch_index = 0
                self.save(epoch_end=True)
                self._barrier()
        if self.batch_index > 0:  # stopped by --max-update inside an epoch
            self._validate_and_log(valid_data)
            self.save()
        self._barrier()
        verdict = self.divergence.final_check(self.num_updates)
        if verdict is not None:
            print(f"diverged: {verdict.reason}", file=sys.stderr)
            self.log.write(
                {
                    "kind": "diverged",
                    "update": self.num_updates,
                    "epoch": self.epoch,
                    "reason": verdict.reason,
                }
            )
            return Outcome(
                "diverged", self.num_updates, self._epoch_reached(), verdict.reason, verdict.criterion
            )
        return Outcome("completed", self.num_updates, self._epoch_reached())

    def _judge(
        self, judged: JudgedUpdate, plan_length: int, bar: Any, valid_data: SplitData
    ) -> Outcome | None:
        """One update's bookkeeping, in update order: the divergence verdict, the update count and lr
        schedule, the meter and log, interval checkpoints. Returns the outcome if the run ends here."""
        cfg, update = self.cfg, judged.update
        self.batch_index += update.batches
        scale = self.scaler.get_scale() if cfg.amp == "fp16" else None
        verdict = self.divergence.check(
            self.num_updates,
            judged.loss_sum / update.total_tokens / LN2,
            judged.nll_sum / update.total_tokens / LN2,
            judged.gnorm,
            scale,
        )
        if verdict is not None:
            return self._diverged(verdict, bar, valid_data)
        if judged.stepped:
            self.num_updates += 1
            self.schedule.step_update(self.num_updates)
            self.meter.add(
                judged.loss_sum, judged.nll_sum, update.total_tokens, judged.gnorm, update.sentences
            )
        if bar is not None:
            bar.update(update.batches)
        if not judged.stepped:
            return None
        if self.lines is not None:
            self.lines.step(
                self.num_updates, self.epoch, self.schedule.get_lr(),
                judged.loss_sum, judged.nll_sum, update.total_tokens, judged.gnorm,
            )  # fmt: skip
        if self.num_updates % cfg.log_interval == 0:
            self._log_train(self.meter, bar)
            self.meter = Meter(time.perf_counter())
        if (
            cfg.validate_interval_updates > 0
            and self.num_updates % cfg.validate_interval_updates == 0
            and self.batch_index < plan_length  # an epoch end validates anyway
            and not self._done()  # so does the end of the run
        ):
            self._validate_and_log(valid_data, mid_epoch=True)
        if (
            cfg.save_interval_updates > 0
            and self.num_updates % cfg.save_interval_updates == 0
            and self.batch_index < plan_length
        ):
            self.save()
        return None

    def _diverged(self, verdict: Verdict, bar: Any, valid_data: SplitData) -> Outcome:
        if bar is not None:
            bar.close()
        if verdict.criterion not in ("non_finite", "loss_scale"):
            self._validate_and_log(valid_data)  # the weights are finite: the dev perplexity it stopped at
        print(f"diverged at update {self.num_updates + 1}: {verdict.reason}", file=sys.stderr)
        self.log.write(
            {
                "kind": "diverged",
                "update": self.num_updates + 1,
                "epoch": self.epoch,
                "reason": verdict.reason,
            }
        )
        return Outcome("diverged", self.num_updates + 1, self.epoch, verdict.reason, verdict.criterion)

    def _preempt(self, bar: Any) -> Outcome:
        if bar is not None:
            bar.close()
        self.save()
        self.log.write({"kind": "preempted", "update": self.num_updates, "epoch": self.epoch})
        print(f"preempted: saved {self.save_dir / LAST} at update {self.num_updates}", file=sys.stderr)
        return Outcome("preempted", self.num_updates, self.epoch, "signal")

    def _validate_and_log(self, valid_data: SplitData, mid_epoch: bool = False) -> None:
        """Validation at an epoch end or the run's end; with ``mid_epoch``, one of
        --validate-interval-updates (marked so, as its epoch's end record follows it)."""
        result = self.validate(valid_data)
        self.last_valid = result
        record = {"kind": "valid", "epoch": self.epoch, "update": self.num_updates, **result}
        if mid_epoch:
            record["mid_epoch"] = True
        self.log.write(record)
        self.tb.write(record)
        if self.is_main:
            print(
                f"epoch {self.epoch} update {self.num_updates}: valid loss {result['loss']:.3f} "
                f"nll {result['nll_loss']:.3f} ppl {result['ppl']:.2f}",
                file=sys.stderr,
            )

    def _progress(self, total: int, mode: str) -> Any:
        if mode != "tqdm":
            return None
        from tqdm import tqdm

        return tqdm(
            total=total, initial=self.batch_index, desc=f"epoch {self.epoch}", unit="batch", leave=False
        )

    def _log_train(self, meter: Meter, bar: Any) -> None:
        if not self.is_main or meter.updates == 0:
            return
        elapsed = max(time.perf_counter() - meter.start, 1e-9)
        memory, memory_kind = peak_memory_mb(self.device)
        loss = meter.loss / meter.tokens / LN2
        nll = meter.nll / meter.tokens / LN2
        record = {
            "kind": "train", "epoch": self.epoch, "update": self.num_updates,
            "loss": loss, "nll_loss": nll, "ppl": ppl(nll), "lr": self.schedule.get_lr(),
            "gnorm": meter.gnorm / meter.updates, "tokens_per_s": meter.tokens / elapsed,
            "updates_per_s": meter.updates / elapsed, "tokens_per_update": meter.tokens / meter.updates,
            "sentences_per_update": meter.sentences / meter.updates, "memory_mb": memory, "memory_kind": memory_kind,
            "time": time.time(),
        }  # fmt: skip
        if self.cfg.amp == "fp16":
            record["loss_scale"] = self.scaler.get_scale()
        self.log.write(record)
        self.tb.write(record)
        if bar is not None:
            bar.set_postfix(
                loss=f"{loss:.3f}", lr=f"{record['lr']:.2e}", tok_s=f"{record['tokens_per_s']:.0f}"
            )
