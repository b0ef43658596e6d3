"""CPU data parallelism inside one process: a few Python threads, one intra-op thread each.

At the sizes this project trains and decodes on a CPU (d <= 512, a few thousand tokens), one
OpenMP team spread over every core inside each small matmul leaves cores waiting; running that many
independent micro-batches (or decoding batches) side by side, single-threaded, keeps them busy.
torch releases the GIL inside its kernels, and the threads share the model's memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def single_intra_op_thread() -> Iterator[None]:
    """torch's intra-op thread count is process-wide: 1 inside the block, restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
