"""One update: forward and backward over this rank's micro-batches (accumulated, optionally in threads),
then unscale, clip and step; with ``--amp fairseq_fp16`` through fp32 master weights (fp16_master.py).

Reproducibility: before every update the torch RNG (dropout) is re-seeded from (seed, update, rank);
on a CPU each micro-batch draws its masks from its own generator, so the thread that runs it does not
matter. Gradients are normalised per target token of the whole update, as fairseq does.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.distributed as torch_dist
from torch import Tensor, nn

from pipeline_lib.cpu.onednn import uses_onednn
from pipeline_lib.cpu.threads import single_intra_op_thread
from pipeline_lib.cpu.weight_grad_sharing import run_micro_batches
from pipeline_lib.model.compile import begin_graph_step
from pipeline_lib.model.dropout import dropout_generator
from pipeline_lib.model.transformer import TransformerModel
from pipeline_lib.train.batching import Batch
from pipeline_lib.train.build import Context
from pipeline_lib.train.collectives import Ranks
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.fp16_master import FP16MasterWeights
from pipeline_lib.train.loss import label_smoothed_nll_loss, output_layer_loss
from pipeline_lib.train.loss_scaler import has_overflow
from pipeline_lib.train.pending_update import HostStats, JudgedUpdate, PendingUpdate
from pipeline_lib.train.run_state import update_seed
from pipeline_lib.train.step_undo import StepUndo


def to_device(batch: Batch, device: torch.device) -> Batch:
    if device.type == "cuda":
        batch = batch.pin_memory()  # an asynchronous copy, which pageable memory cannot have
    return batch.to(device)


class Updater:
    """Owns what an update touches: the model (and its DDP wrapper), the optimizer and the loss scaler."""

    def __init__(
        self,
        cfg: TrainConfig,
        ctx: Context,
        model: TransformerModel,
        params: list[nn.Parameter],
        optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler,
        ranks: Ranks,
        amp_dtype: torch.dtype | None,
        chunked_loss: bool,
        fp16_master: FP16MasterWeights | None = None,
    ) -> None:
        self.cfg, self.ctx, self.ranks = cfg, ctx, ranks
        self.fp16_master = fp16_master
        self._grad_multiplier = 1.0  # fairseq_fp16: world / target tokens, applied to the masters
        self.model, self.params, self.optimizer, self.scaler = model, params, optimizer, scaler
        self.device = ranks.device
        self.amp_dtype = amp_dtype
        self.chunked_loss = chunked_loss
        self.ddp: nn.Module = model  # the DDP wrapper once wrap_ddp() has run
        # --deferred-stats with a loss scaler: each step is taken with a copy to undo it on overflow
        self.undo: StepUndo | None = None
        if cfg.deferred_stats and cfg.amp in ("fp16", "fairseq_fp16"):
            self.undo = StepUndo(optimizer, fp16_master.masters if fp16_master is not None else params)
        self._judged_scale: float | None = None  # --amp fp16 deferred: the scale read with the stats

    def wrap_ddp(self) -> None:
        if self.ranks.distributed and self.ddp is self.model:
            self.ddp = nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                broadcast_buffers=False,
                gradient_as_bucket_view=True,
            )

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def forward_loss(self, batch: Batch, module: nn.Module | None = None) -> tuple[Tensor, Tensor]:
        """(loss_sum, nll_sum) of one batch through ``module`` (default: the DDP wrapper)."""
        module = module or self.ddp
        if self.cfg.compile_mode == "reduce-overhead":  # a new forward (training or validation)
            begin_graph_step()
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

    def accumulate_gradients(
        self, batches: list[Batch], total_tokens: float, update: int, unjudged: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Forward/backward over this rank's micro-batches; leaves per-target-token gradients in .grad.
        Returns this rank's (loss_sum, nll_sum) in nats. ``update`` (the updates done, or with
        --deferred-stats the update still being judged counted too) seeds dropout; ``unjudged``: an
        update is still being judged, and fairseq's loss scale is the one it leaves if it steps."""
        rank, world = self.ranks.rank, self.ranks.world
        torch.manual_seed(update_seed(self.cfg.seed, update, rank))
        self.ddp.train()
        # DDP averages gradients over ranks; fairseq's normalisation is per target token of the update.
        scale = world / total_tokens
        if self.fp16_master is not None:
            # fairseq backpropagates the summed loss times the loss scale and normalises the fp32 copies
            # (its gradients' magnitude in fp16, hence its overflows, depend on it)
            scaler = self.fp16_master.scaler
            self._grad_multiplier = scale
            scale = scaler.scale_after_clean_update() if unjudged else scaler.loss_scale
        if self.cfg.cpu_workers > 1:
            return self._accumulate_in_threads(batches, scale, update)
        loss_acc = torch.zeros((), device=self.device)
        nll_acc = torch.zeros((), device=self.device)
        for i, batch in enumerate(batches):
            sync = not self.ranks.distributed or i == len(batches) - 1
            with (
                contextlib.nullcontext() if sync else self.ddp.no_sync(),
                dropout_generator(self._micro_batch_generator(update, i)),
            ):
                loss, nll = self.forward_loss(batch)
                self.scaler.scale(loss * scale).backward()
            loss_acc += loss.detach()
            nll_acc += nll.detach()
        return loss_acc, nll_acc

    def _micro_batch_generator(self, update: int, index: int) -> torch.Generator | None:
        """CPU: dropout masks from (seed, update, rank, micro-batch) alone, whichever thread runs it.
        CUDA keeps the global generator and ATen's fused dropout kernel."""
        if self.device.type != "cpu" or self.cfg.compile:  # compiled dropout has its own RNG
            return None
        seed = update_seed(self.cfg.seed, update, (self.ranks.rank + 1) * 100_003 + index)
        return torch.Generator().manual_seed(seed)

    def _accumulate_in_threads(
        self, batches: list[Batch], scale: float, update: int
    ) -> tuple[Tensor, Tensor]:
        """--cpu-workers: micro-batches side by side, one intra-op thread each; their gradients are
        summed in micro-batch order, as sequential backward() calls would accumulate them. The oneDNN
        layers' weight-gradient products go to queues that an idle worker helps empty
        (``weight_grad_sharing``)."""

        def micro_batch(i: int) -> tuple[Tensor, Tensor, tuple[Tensor | None, ...]]:
            with dropout_generator(self._micro_batch_generator(update, i)):
                loss, nll = self.forward_loss(batches[i])
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

    def unscale_and_clip(self, loss_acc: Tensor, nll_acc: Tensor) -> Tensor:
        """Unscaled, clipped gradients in .grad; returns [loss_sum, nll_sum, gnorm] (float64, on the
        device), the sums over all ranks. The norm is the same on every rank after DDP's all-reduce."""
        params = self.params
        if self.fp16_master is not None:
            self.fp16_master.gradients_to_masters(self._grad_multiplier)
            params = self.fp16_master.masters
        else:
            self.scaler.unscale_(self.optimizer)
        grads = [p.grad for p in params if p.grad is not None]
        gnorm = torch.nn.utils.get_total_norm(grads, foreach=True)
        if self.cfg.clip_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(params, self.cfg.clip_norm, gnorm, foreach=True)
        stats = torch.stack([loss_acc.double(), nll_acc.double()])
        if self.ranks.distributed:
            torch_dist.all_reduce(stats)
        return torch.cat([stats, gnorm.double().reshape(1)])

    def step_without_reading(self, loss_acc: Tensor, nll_acc: Tensor) -> HostStats:
        """--deferred-stats: the optimizer step, with the statistics left for later. The step is not
        gated on finite values: without fp16, a non-finite update is a divergence, which ends the run
        when it is read, one update later, before anything is saved or validated; with fp16, an
        overflow read by :meth:`conclude` takes the step back."""
        stats = self.unscale_and_clip(loss_acc, nll_acc)
        if self.undo is not None:
            self.undo.take()
        self.optimizer.step()
        if self.fp16_master is not None:
            self.fp16_master.copy_to_model()
            self.fp16_master.zero_grad()
        elif self.cfg.amp == "fp16":
            # the scaler's own overflow flag (what its step() reads on the host) and the scale its
            # update() leaves, both on the device: the next backward already uses that scale
            state = self.scaler._per_optimizer_states[id(self.optimizer)]
            found_inf = sum(state["found_inf_per_device"].values())
            self.scaler.update()
            scale = self.scaler._get_scale_async()
            assert isinstance(found_inf, Tensor) and scale is not None
            stats = torch.cat([stats, found_inf.double().reshape(1), scale.double().reshape(1)])
        self.optimizer.zero_grad(set_to_none=True)
        return HostStats.copy_from(stats)

    def conclude(self, pending: PendingUpdate) -> JudgedUpdate:
        """--deferred-stats: read a stepped update's statistics and judge it as :meth:`train_step`
        would have: with fp16 an overflow updates the scaler as the synchronous path does and takes the
        step back."""
        values = pending.stats.read()
        loss_sum, nll_sum, gnorm = values[:3]
        stepped = True
        if self.fp16_master is not None:
            overflow = has_overflow(gnorm)
            self.fp16_master.scaler.update_scale(overflow)
            stepped = not overflow
        elif self.cfg.amp == "fp16":
            stepped, self._judged_scale = values[3] == 0, values[4]
        if not stepped:
            assert self.undo is not None
            self.undo.restore()
            if self.fp16_master is not None:
                self.fp16_master.copy_to_model()
        return JudgedUpdate(pending.update, loss_sum, nll_sum, gnorm, stepped)

    def replay(self, batches: list[Batch], total_tokens: float, update: int) -> tuple[Tensor, Tensor]:
        """--deferred-stats: the forward/backward queued after an update that turned out to overflow,
        again, with the seed and loss scale the synchronous path gives it (the update count did not
        advance, the scale fell)."""
        for p in self.params:
            p.grad = None
        return self.accumulate_gradients(batches, total_tokens, update)

    def train_step(
        self, batches: list[Batch], total_tokens: float, update: int
    ) -> tuple[float, float, float, bool]:
        """One update. Returns (loss_sum, nll_sum, gnorm, stepped), sums over all ranks in nats;
        ``stepped`` is False when the step was skipped (fp16 overflow, non-finite values)."""
        loss_acc, nll_acc = self.accumulate_gradients(batches, total_tokens, update)
        loss_sum, nll_sum, gnorm_value = self.unscale_and_clip(loss_acc, nll_acc).tolist()
        stepped = True
        if self.fp16_master is not None:
            return loss_sum, nll_sum, gnorm_value, self.fp16_master.conclude(self.optimizer, gnorm_value)
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

    def loss_scale(self) -> float | None:
        """The loss scale of the fp16 modes (after this update's rescale), else None."""
        if self.fp16_master is not None:
            return self.fp16_master.loss_scale
        if self.cfg.amp != "fp16":
            return None
        if self.cfg.deferred_stats and self._judged_scale is not None:
            return self._judged_scale  # read with the judged update's statistics: no host wait
        return self.scaler.get_scale()
