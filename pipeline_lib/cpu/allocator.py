"""Keep freed tensor memory inside the process between steps (glibc malloc, CPU runs).

A beam search step or a training update allocates and frees the same multi-MB tensors every time;
glibc's mmap threshold and heap trimming turn that into page faults on every step. Fixing the mmap
threshold at its maximum and trimming only above 2 GiB keeps those pages mapped (setting only the
trim threshold is worse: it freezes the mmap threshold at 128 KiB). The worker threads of
``train --cpu-workers`` and ``translate --workers`` also get a single malloc arena, so that they reuse
each other's freed memory instead of unmapping per-thread heaps. Measurements: bench/HISTORY.md.
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
