"""``--amp fairseq_fp16``: training as fairseq's ``--fp16`` does (its FP16Optimizer).

The model's weights and activations are fp16 (``model.half()``); the optimizer updates an fp32 master
copy of every parameter and the result is rounded back into the model after each step. The summed
loss (fp32, log-softmax in fp32 as fairseq's) is multiplied by the loss scale before backward; the
fp16 gradients are copied into the masters and multiplied there, in fp32, by
``world / (target tokens x loss scale)``; the gradient norm of the masters decides overflow, which
skips the update and lowers the scale (:mod:`pipeline_lib.train.loss_scaler`).

LiyuanLucasLiu/Transformer-Clinic@70f72b7 fairseq/fairseq/optim/fp16_optimizer.py:102-168 (backward,
the fp16-to-fp32 copy and its multiplication, the clip that decides overflow, the step and the copy
back) and fairseq/fairseq/trainer.py:419-429 (the normalisation by ``world / sample_size`` before
the clip). fairseq keeps the masters in one flat tensor; here each parameter has its own, which gives
the same numbers. Unlike fairseq, whose checkpoints hold the fp16 model (the masters are rebuilt from
it on resume), checkpoints hold the fp32 masters, so a resumed run continues exactly and averaging,
decoding and export read the same fp32 format as every other mode.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pipeline_lib.train.loss_scaler import DynamicLossScaler, has_overflow


class FP16MasterWeights:
    def __init__(self, model: nn.Module, scaler: DynamicLossScaler, min_loss_scale: float) -> None:
        self.scaler = scaler
        self.min_loss_scale = min_loss_scale
        self.names = [name for name, p in model.named_parameters() if p.requires_grad]
        self.model_params = [p for p in model.parameters() if p.requires_grad]
        model.half()
        # from the fp16 weights, as fairseq's build_fp32_params (fp16_optimizer.py:64-75): the masters
        # start at the initialisation rounded to fp16
        self.masters = [nn.Parameter(p.detach().float().clone()) for p in self.model_params]

    @property
    def loss_scale(self) -> float:
        return self.scaler.loss_scale

    def minimum_reached(self) -> bool:
        """fairseq's stop: an overflow left the scale at or below ``--min-loss-scale``."""
        return self.scaler.loss_scale <= self.min_loss_scale

    def gradients_to_masters(self, multiply: float) -> None:
        """Copy the fp16 gradients into the fp32 masters, times ``multiply / loss_scale``."""
        for master, p in zip(self.masters, self.model_params, strict=True):
            master.grad = p.grad.float() if p.grad is not None else torch.zeros_like(master)
        # fairseq multiplies by one constant, computed in double precision (fp16_optimizer.py:119)
        torch._foreach_mul_([m.grad for m in self.masters], multiply / self.scaler.loss_scale)

    def conclude(self, optimizer: torch.optim.Optimizer, grad_norm: float) -> bool:
        """Judge the update by its gradient norm: update the scaler, then step the masters and copy them
        into the model, or skip. Returns whether the update stepped."""
        overflow = has_overflow(grad_norm)
        self.scaler.update_scale(overflow)
        if not overflow:
            optimizer.step()
            self.copy_to_model()
        self.zero_grad()
        return not overflow

    def copy_to_model(self) -> None:
        """The masters, rounded, into the fp16 model (fp16_optimizer.py:166-168)."""
        with torch.no_grad():
            torch._foreach_copy_(self.model_params, self.masters)

    def zero_grad(self) -> None:
        for p in self.model_params:
            p.grad = None
        for m in self.masters:
            m.grad = None

    def fp32_state(self, model_state: dict[str, Tensor]) -> dict[str, Tensor]:
        """The model's state dict with every parameter taken from its fp32 master (buffers as fp32)."""
        state = {k: v.float() if v.is_floating_point() else v for k, v in model_state.items()}
        for name, master in zip(self.names, self.masters, strict=True):
            state[name] = master.detach().clone()
        return state

    def load_fp32_state(self, model_state: dict[str, Tensor]) -> None:
        """Masters from a checkpoint's fp32 weights (the model is loaded, rounded, by the caller)."""
        with torch.no_grad():
            for name, master in zip(self.names, self.masters, strict=True):
                master.copy_(model_state[name])
