"""The model's linear layer: ``nn.Linear`` with a replaceable product.

The CPU fast path (``pipeline_lib.cpu.onednn.set_cpu_gemm``) sets ``product`` per layer to run fp32
CPU matmuls on oneDNN; the model itself carries no CPU-specific code.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Product = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]


class Linear(nn.Linear):
    """``nn.Linear`` whose fp32 CPU products go through ``product`` when one is set."""

    product: Product | None = None

    def forward(self, x: Tensor) -> Tensor:
        product = self.product
        if product is not None and x.device.type == "cpu" and x.dtype == self.weight.dtype == torch.float32:
            return product(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)
