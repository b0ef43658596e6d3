"""``--deferred-stats`` with a loss scaler: an optimizer step that can be taken back.

With fp16 the host learns whether update k overflowed only when it reads k's statistics, after update
k+1's forward and backward have been queued. So k steps unconditionally, behind a copy of everything the
step writes (the weights the optimizer updates and the optimizer's state); reading an overflow puts the
copy back, which leaves weights and state exactly as the synchronous path leaves them when it skips the
step. Masking the step on the device instead would need kernels that take the scaler's ``found_inf``
(torch has them only for its own fused Adam/AdamW, with torch's eps placement; none for RAdam), and a
NaN gradient survives any multiplicative mask. The price: one device-to-device copy of the updated
tensors per update (3 fp32 values per parameter for the Adam family) and that much memory.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class StepUndo:
    def __init__(self, optimizer: torch.optim.Optimizer, params: list[Tensor]) -> None:
        self.optimizer = optimizer
        self.params = params  # what the optimizer updates (the fp32 masters with fairseq_fp16)
        self._tensors: list[Tensor] = []  # what the last take() copied ...
        self._copies: list[Tensor] = []  # ... and its copies, reused from update to update
        self._states: list[dict[str, Any] | None] = []  # each parameter's state dict before (None: none)

    def take(self) -> None:
        """Copy what the next ``optimizer.step()`` writes (no host read)."""
        state = self.optimizer.state
        # shallow: the tensors are copied below; the dict keeps the host values (fairseq's int step)
        self._states = [dict(state[p]) if p in state else None for p in self.params]
        tensors = list(self.params) + [
            v for s in self._states if s is not None for v in s.values() if isinstance(v, Tensor)
        ]
        same = len(tensors) == len(self._tensors) and all(
            a is b for a, b in zip(tensors, self._tensors, strict=True)
        )
        if not same:  # the first steps create the optimizer's state
            self._copies = [torch.empty_like(t) for t in tensors]
        self._tensors = tensors
        with torch.no_grad():
            torch._foreach_copy_(self._copies, tensors)

    def restore(self) -> None:
        """Put back what the last ``take()`` copied: the step it preceded never happened."""
        with torch.no_grad():
            torch._foreach_copy_(self._tensors, self._copies)
        state = self.optimizer.state
        for p, before in zip(self.params, self._states, strict=True):
            if before is None:
                state.pop(p, None)  # its first step: the state is created afresh next time
            else:
                state[p] = before
