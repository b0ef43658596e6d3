"""Ordered chunk-parallel map used by preprocessing and subword application.

Lines are grouped in chunks and chunks go to a ``multiprocessing`` pool. Results come back in
input order and at most ``2 * workers`` chunks are in flight (``Pool.imap`` would read the
whole input ahead into its queue), so a 36M-line corpus streams through in bounded memory.
A single worker runs in-process (no pickling cost, easy debugging).
"""

from __future__ import annotations

import collections
import gc
import itertools
import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def map_chunks(
    fn: Callable[[list[T]], R],
    items: Iterable[T],
    *,
    workers: int,
    chunk_size: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[R]:
    """Yield ``fn(chunk)`` for consecutive chunks of ``items``, in order."""
    chunks = chunked(items, chunk_size)
    if workers <= 1:
        if initializer is not None:
            initializer(*initargs)
        yield from map(fn, chunks)
        return
    # fork keeps start-up cheap on Linux; the workers only run pure functions.
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    # The objects that exist at fork time stay out of every garbage collection while the workers
    # live, in the workers and in the parent alike. A full collection writes to every object it
    # visits, so each inherited page it touches is copied: in a worker, or in the parent (whose
    # first full collection, ~1M pairs into a preprocess run, copied ~9 MB at once).
    gc.freeze()
    try:
        with ctx.Pool(workers, initializer=initializer, initargs=initargs) as pool:
            pending: collections.deque = collections.deque()
            for chunk in chunks:
                pending.append(pool.apply_async(fn, (chunk,)))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().get()
            while pending:
                yield pending.popleft().get()
    finally:
        gc.unfreeze()  # the workers are gone (or going): the parent collects them as before
