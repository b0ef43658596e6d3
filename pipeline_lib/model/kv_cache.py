"""Keys and values kept across incremental decoding steps.

Both caches hand attention (batch, heads, time, head_dim) views whose (batch, heads) dims merge into
one without a copy, so single-query attention runs as one strided ``bmm`` per matmul. Their storage
differs because the two are used differently:

* ``SelfAttentionCache`` grows by one step per decoding step and is reordered every step (beam
  search). It is stored time-major, (capacity, batch, heads, head_dim): the filled part is one
  block whatever the capacity, and appending writes one slab (a batch-major buffer would hand
  ``bmm`` matrices ``capacity`` steps apart, which is slower).
* ``EncoderKeyValues`` is computed once per batch from the encoder output and only shrinks when
  sentences finish: stored contiguous, batch-major.

Reorders copy only the rows that change, in place, when they are at most half of the new rows
(``changed_rows``); a batch that shrinks that way keeps its buffers and uses their first rows. Beam
search says more: how many first steps each row shares with its new history (``unshared_cells``),
and only the later steps are copied. Measurements: bench/HISTORY.md.
"""

from __future__ import annotations

import torch
from torch import Tensor


def changed_rows(order: Tensor, rows: int) -> Tensor | None:
    """Positions ``i`` with ``order[i] != i``, when a reorder of ``rows`` rows into ``order`` can run
    in place: the batch does not grow and at most half of its new rows change. None otherwise."""
    if order.shape[0] > rows:
        return None
    moved = order.ne(torch.arange(order.shape[0], device=order.device)).nonzero().squeeze(1)
    return moved if 2 * moved.numel() <= order.shape[0] else None


def reorder_rows(tensor: Tensor, order: Tensor, moved: Tensor | None) -> Tensor:
    """tensor[order] along dim 0. With ``moved`` (``changed_rows``), in place: only the moved rows are
    copied, and the result is a view of ``tensor``'s first ``len(order)`` rows."""
    if moved is None:
        return select_rows(tensor, order)
    if moved.numel():
        tensor.index_copy_(0, moved, tensor.index_select(0, order[moved]))
    return tensor[: order.shape[0]]


def select_rows(tensor: Tensor, order: Tensor, out: Tensor | None = None) -> Tensor:
    """tensor[order] along dim 0, on a 2-D view (several times faster than N-D on CPU); ``out``, when
    it has the right shape, is reused instead of allocating (fresh multi-MB buffers page-fault)."""
    rows = tensor.shape[0]
    shape = (order.shape[0], *tensor.shape[1:])
    reusable = out is not None and out.shape == shape and out.dtype == tensor.dtype and out is not tensor
    if not reusable or (torch.is_grad_enabled() and tensor.requires_grad):
        return tensor.reshape(rows, -1).index_select(0, order).view(shape)
    torch.index_select(tensor.reshape(rows, -1), 0, order, out=out.view(order.shape[0], -1))
    return out


class SelfAttentionCache:
    """Self-attention keys/values of the steps decoded so far, for each decoder row."""

    def __init__(self) -> None:
        # (capacity, row capacity, heads, head_dim): rows [0, self.rows) are live; the rest are left
        # behind by in-place shrinking (``reorder`` with ``cells``)
        self._key: Tensor | None = None
        self._value: Tensor | None = None
        self._spare: tuple[Tensor | None, Tensor | None] = (None, None)  # reorder targets, reused
        self.length = 0
        self.rows = 0

    @property
    def key(self) -> Tensor | None:
        return None if self._key is None else self._key[: self.length, : self.rows].permute(1, 2, 0, 3)

    @property
    def value(self) -> Tensor | None:
        return None if self._value is None else self._value[: self.length, : self.rows].permute(1, 2, 0, 3)

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add (batch, heads, new, head_dim) keys/values; returns the whole history in that shape."""
        new = key.shape[2]
        if self._key is None or self.length + new > self._key.shape[0]:
            capacity = max(32, 2 * (self.length + new))
            self._key = self._grow(self._key, key, capacity)
            self._value = self._grow(self._value, value, capacity)
            self.rows = key.shape[0]
        self._key[self.length : self.length + new, : self.rows] = key.permute(2, 0, 1, 3)
        self._value[self.length : self.length + new, : self.rows] = value.permute(2, 0, 1, 3)
        self.length += new
        return self.key, self.value

    def _grow(self, old: Tensor | None, like: Tensor, capacity: int) -> Tensor:
        batch, heads, _, dim = like.shape
        buffer = like.new_empty(capacity, batch, heads, dim)
        if old is not None and self.length:
            buffer[: self.length] = old[: self.length, : self.rows]
        return buffer

    def reorder(self, order: Tensor, cells: tuple[Tensor, Tensor] | None = None) -> None:
        """Rows become ``order``'s rows (the batch may shrink). With ``cells`` (``unshared_cells``)
        only those (step, row) cells are copied, in place, and the live rows become a prefix of the
        buffer; otherwise every row is copied into a spare buffer."""
        if self._key is None:
            return
        if cells is not None:
            self.copy_cells(*cells)
        else:
            spare_key, spare_value = self._spare
            self._spare = (self._key, self._value)
            self._key = self._select_filled(self._key, order, spare_key)
            self._value = self._select_filled(self._value, order, spare_value)
        self.rows = order.shape[0]

    def unshared_cells(self, order: Tensor, shared: Tensor) -> tuple[Tensor, Tensor] | None:
        """The (step, row) cells that an in-place reorder into ``order`` must copy, as flat
        (destination, source) indices, when row ``i`` already holds the first ``shared[i]`` steps of
        its new history. Beams of one sentence mostly share their first tokens, hence their keys and
        values there: a row that takes a sibling's history needs only the steps after the two parted.
        None where the reorder cannot run in place (the batch grows)."""
        if self._key is None or order.shape[0] > self.rows:
            return None
        steps = torch.arange(self.length, device=order.device)
        row, step = (steps.unsqueeze(0) >= shared.unsqueeze(1)).nonzero(as_tuple=True)
        row_capacity = self._key.shape[1]
        return step * row_capacity + row, step * row_capacity + order[row]

    def copy_cells(self, dest: Tensor, source: Tensor) -> None:
        """In place: cell ``dest[i]`` takes cell ``source[i]`` (flat step * row capacity + row); other
        cells are untouched. Sources are gathered before anything is written, so the two may overlap."""
        if self._key is None or dest.numel() == 0:
            return
        for buffer in (self._key, self._value):
            cells = buffer.view(-1, buffer.shape[2] * buffer.shape[3])
            cells.index_copy_(0, dest, cells.index_select(0, source))

    def _select_filled(self, buffer: Tensor, order: Tensor, out: Tensor | None) -> Tensor:
        """buffer[:, order] for the filled steps only (the buffer is up to twice as long as what it
        holds, and this copy runs every step of a beam search for every layer: memory-bound)."""
        if torch.is_grad_enabled() and buffer.requires_grad:
            return buffer.index_select(1, order)  # out= cannot record a graph
        shape = (buffer.shape[0], order.shape[0], *buffer.shape[2:])
        if out is None or out.shape != shape or out.dtype != buffer.dtype:
            out = buffer.new_empty(shape)
        n = self.length
        torch.index_select(buffer[:n], 1, order, out=out[:n])
        return out


class EncoderKeyValues:
    """Cross-attention keys/values, computed once from the encoder output, (batch, heads, src, dim)."""

    def __init__(self) -> None:
        self.key: Tensor | None = None
        self.value: Tensor | None = None

    @property
    def rows(self) -> int:
        return 0 if self.key is None else self.key.shape[0]

    def store(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        self.key, self.value = key.contiguous(), value.contiguous()
        return self.key, self.value

    def reorder(self, order: Tensor, moved: Tensor | None = None) -> None:
        """Rows become ``order``'s rows; in place on a prefix with ``moved`` (``changed_rows``)."""
        if self.key is not None:
            self.key, self.value = (
                reorder_rows(self.key, order, moved),
                reorder_rows(self.value, order, moved),
            )
