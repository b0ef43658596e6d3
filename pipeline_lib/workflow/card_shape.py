"""Training jobs shaped to the card: the recipe fixes the tokens per update, the card the per-GPU batch.

fairseq's effective batch is ``max_tokens x update_freq x GPUs``; the learning rate and its schedule
are per update, so a run keeps its meaning whenever that product stays the same. The recipes state
the authors' shape (3,584 tokens per GPU on 16 GB V100s, ``update_freq`` making up the rest); a
config's ``card`` section names the memory of the cards the jobs will get, and each GPU training job
is reshaped for it:

1. **the per-GPU cap**: the largest ``max_tokens`` whose estimated peak
   (:mod:`pipeline_lib.model.memory_estimate`, the recipe's dropouts, ``amp`` and activation
   checkpointing) stays within ``memory_gb x usable_fraction - context_gb`` (the estimate is of
   ``max_memory_allocated``; the fraction leaves the caching allocator's slack, the context its ~1 GB);
2. **the GPU count**: the fewest GPUs (1, 2, 4 ... up to a node, then whole nodes) that train the
   recipe's tokens per update with ``update_freq`` 1 under the cap, never more than the authors'
   count (more GPUs than they used would be a wall-time choice, not the card's); when even the
   authors' count needs accumulation, their count with the smallest ``update_freq`` that fits;
3. **no rounding**: GPU counts and ``update_freq`` are taken among the divisors of the tokens per
   update, so ``max_tokens = tokens_per_update / (GPUs x update_freq)`` exactly and the product equals
   the recipe's (the run identity keys on that product: pipeline_lib/train/run_identity.py).

Jobs of more than ``gpus_per_node`` GPUs become multi-node ``srun`` jobs of whole nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline_lib.errors import ConfigError

# A peak above the cap is what the search looks for; tokens beyond this are never a per-GPU batch.
MAX_TOKENS_SEARCHED = 1 << 22


@dataclass(frozen=True)
class Card:
    """The config's ``card`` section."""

    memory_gb: float
    name: str | None = None  # picks the measured rates (gpu_cost.py); default: by memory_gb
    gpus_per_node: int = 8
    usable_fraction: float = 0.85  # the allocator's cached slack over max_memory_allocated
    context_gb: float = 1.0  # the CUDA context and cuBLAS/NCCL workspaces

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> Card | None:
        if not section:
            return None
        card = cls(**section)
        if card.usable_gb <= 0:
            raise ConfigError(
                f"card: memory_gb {card.memory_gb} x usable_fraction {card.usable_fraction} leaves nothing "
                f"after context_gb {card.context_gb}"
            )
        return card

    @property
    def usable_gb(self) -> float:
        return self.memory_gb * self.usable_fraction - self.context_gb


@dataclass(frozen=True)
class JobShape:
    gpus: int
    max_tokens: int
    update_freq: int

    @property
    def tokens_per_update(self) -> int:
        return self.gpus * self.max_tokens * self.update_freq


def token_cap(peak_gb: Callable[[int], float], usable_gb: float) -> int:
    """The largest per-GPU ``max_tokens`` whose estimated peak fits ``usable_gb`` (0: not even one token).
    ``peak_gb`` grows with the tokens (the estimate is affine in them)."""
    lo, hi = 0, MAX_TOKENS_SEARCHED
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if peak_gb(mid) <= usable_gb:
            lo = mid
        else:
            hi = mid - 1
    return lo


def gpu_counts(most: int, per_node: int) -> list[int]:
    """The job sizes tried, ascending: powers of two up to a node, then whole nodes, up to ``most``."""
    counts = [n for n in (1 << k for k in range(per_node.bit_length() + 1)) if n <= min(per_node, most)]
    counts += [per_node * k for k in range(2, most // per_node + 1)]
    return sorted(set(counts + [most]))


def shape_for_card(tokens_per_update: int, authors_gpus: int, cap: int, per_node: int) -> JobShape:
    """The job shape of module doc steps 2 and 3 for a per-GPU cap of ``cap`` tokens."""
    if cap < 1:
        raise ConfigError("card: not even one token per GPU fits the estimated memory of this model")
    for n in gpu_counts(authors_gpus, per_node):
        if tokens_per_update % n == 0 and tokens_per_update // n <= cap:
            return JobShape(n, tokens_per_update // n, 1)
    if tokens_per_update % authors_gpus:
        raise ConfigError(
            f"tokens per update {tokens_per_update:,} is not divisible by the authors' {authors_gpus} GPUs"
        )
    per_gpu = tokens_per_update // authors_gpus
    freq = next(u for u in range(1, per_gpu + 1) if per_gpu % u == 0 and per_gpu // u <= cap)
    return JobShape(authors_gpus, per_gpu // freq, freq)


def job_resources(shape: JobShape, per_node: int) -> dict[str, Any]:
    """The train rule's GPU resources for ``shape`` (None drops a resource: one node needs no srun)."""
    if shape.gpus <= per_node:
        return {"gpu": shape.gpus, "nodes": None, "tasks_per_node": None, "mpi": None}
    if shape.gpus % per_node:
        raise ConfigError(f"{shape.gpus} GPUs are not whole nodes of card.gpus_per_node {per_node}")
    return {"gpu": shape.gpus, "nodes": shape.gpus // per_node, "tasks_per_node": per_node, "mpi": "srun"}
