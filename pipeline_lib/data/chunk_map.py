"""Ordered chunk-parallel map used by the data stages.

Lines are grouped in chunks and chunks go to a ``multiprocessing`` pool. Results come back in
input order and at most ``2 * workers`` chunks are in flight (``Pool.imap`` would read the
whole input ahead into its queue), so a 36M-line corpus streams through in bounded memory.
A single worker runs in-process (no pickling cost, easy debugging).

For a file, :func:`map_line_blocks` (and :func:`scan_file`) send the workers raw blocks of lines to
decode and validate: the main process, which is the serial part of a stage, then only cuts the file.
Decoding there cost binarize's main process more than the workers' whole encoding did.
"""

from __future__ import annotations

import collections
import gc
import itertools
import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pipeline_lib.data.textio import BOM, decode_block, line_blocks

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
    tasks = ((chunk,) for chunk in chunked(items, chunk_size))
    return _map_ordered(fn, tasks, workers, initializer, initargs)


def map_line_blocks(
    fn: Callable[[list[str]], R],
    path: Path,
    *,
    workers: int,
    chunk_size: int,
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[R]:
    """Yield ``fn(lines)`` for consecutive chunks of ``chunk_size`` lines of the UTF-8 file ``path``,
    in order. The main process only cuts the file into raw blocks; decoding and validation (with
    :func:`~pipeline_lib.data.textio.read_lines`' file:line errors) happen in the workers, so the
    main process, the serial part of a stage, does no per-line work."""
    tasks = ((fn, path, lineno, block) for lineno, block in line_blocks(path, chunk_size))
    return _map_ordered(_on_decoded_block, tasks, workers, initializer, initargs)


def scan_file(path: Path, workers: int, chunk_size: int = 2_000) -> tuple[int, int, bool]:
    """(lines, lines that ended in CRLF or a lone CR, whether the file starts with a byte-order mark),
    validating every line with :func:`~pipeline_lib.data.textio.read_lines`' errors; the decoding is
    in the workers."""
    tasks = ((path, lineno, block) for lineno, block in line_blocks(path, chunk_size))
    lines = crlf = 0
    bom = False
    for n, n_crlf, block_bom in _map_ordered(_scan_block, tasks, workers, None, ()):
        lines, crlf, bom = lines + n, crlf + n_crlf, bom or block_bom
    return lines, crlf, bom


def _scan_block(path: Path, lineno: int, block: bytes) -> tuple[int, int, bool]:
    n = len(decode_block(path, lineno, block))
    # "\r\n" only ends a line; a last line without "\n" counts if it ends in "\r"
    crlf = block.count(b"\r\n") + (not block.endswith(b"\n") and block.endswith(b"\r"))
    return n, crlf, lineno == 1 and block.startswith(BOM.encode("utf-8"))


def _on_decoded_block(fn: Callable[[list[str]], R], path: Path, lineno: int, block: bytes) -> R:
    return fn(decode_block(path, lineno, block))


# A worker's initializer error, raised by its first task: a Pool whose initializer raises replaces
# the dead worker with a new one forever (a segmenter that cannot load its model hung the stage).
_INIT_ERROR: list[BaseException] = []


def _guarded_init(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    if initializer is None:
        return
    try:
        initializer(*initargs)
    except BaseException as exc:  # re-raised by the worker's first task
        _INIT_ERROR.append(exc)


def _run_task(fn: Callable[..., R], *task: Any) -> R:
    if _INIT_ERROR:
        raise _INIT_ERROR[0]
    return fn(*task)


def _map_ordered(
    fn: Callable[..., R],
    tasks: Iterator[tuple[Any, ...]],
    workers: int,
    initializer: Callable[..., None] | None,
    initargs: tuple[Any, ...],
) -> Iterator[R]:
    """Yield ``fn(*task)`` per task, in order, at most ``2 * workers`` tasks in flight."""
    if workers <= 1:
        if initializer is not None:
            initializer(*initargs)
        yield from (fn(*task) for task in tasks)
        return
    # fork keeps start-up cheap on Linux; the workers only run pure functions.
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    # The objects that exist at fork time stay out of every garbage collection while the workers
    # live, in the workers and in the parent alike. A full collection writes to every object it
    # visits, so each inherited page it touches is copied: in a worker, or in the parent (whose
    # first full collection, ~1M pairs into a preprocess run, copied ~9 MB at once).
    gc.freeze()
    pool = ctx.Pool(workers, initializer=_guarded_init, initargs=(initializer, initargs))
    finished = False
    try:
        pending: collections.deque = collections.deque()
        for task in tasks:
            pending.append(pool.apply_async(_run_task, (fn, *task)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
        finished = True
    finally:
        # Every task done: the workers leave on the queue's end marker (close), with no signal. Only
        # an error or an abandoned iteration kills them (terminate): terminate() on idle workers
        # hung in its join, a worker blocked on the task queue's lock never leaving (Python 3.11).
        if finished:
            pool.close()
        else:
            pool.terminate()
        pool.join()
        gc.unfreeze()  # the workers are gone: the parent collects them as before
