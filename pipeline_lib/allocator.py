"""Keep freed tensor memory inside the process between steps (glibc malloc, CPU runs).

glibc hands allocations above its mmap threshold (128 KiB, raised dynamically) to fresh ``mmap``
pages and gives the top of the heap back to the OS once more than the trim threshold is free. A beam
search step or a training update allocates and frees the same multi-MB tensors every time, so both
policies turn into page faults on every step. Fixing the mmap threshold at its 32 MiB maximum and
trimming only above 2 GiB keeps those pages mapped: beam-4 decoding of the bench model on one thread
went from 25.3 to 27.0 sent/s (bench/decode_throughput.py, 2026-11-22). Setting only the trim
threshold is worse than nothing (it freezes the mmap threshold at 128 KiB).

The worker threads of ``train --cpu-workers`` and ``translate --workers`` also need a single malloc
arena: each thread otherwise allocates from an arena of its own, whose heaps glibc unmaps once they
are empty, whatever the trim threshold. Two-worker training took ~150k page faults per update that
way (600 MB of fresh pages); with one arena it takes almost none, and its peak RSS is lower, since
the threads reuse each other's freed memory: 1,636 -> 1,517 MiB in bench/compare.py (the mean of
two alternating runs, 2026-11-23), at the same speed within the noise (1,399 vs 1,412 tok/s).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's ceiling on 64-bit (4 * 1024 * 1024 * sizeof(long))
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int


def keep_freed_memory() -> bool:
    """Apply the three mallopt settings; False where the C library is not glibc (macOS, musl).

    Call it before any worker thread starts: a thread that has already allocated keeps its arena."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # mmap first: setting the trim threshold alone would freeze the mmap threshold at 128 KiB
    return (
        bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX))
        and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        and bool(mallopt(M_ARENA_MAX, 1))
    )
