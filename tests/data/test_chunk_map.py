"""map_chunks: ordered results, and the fork-time objects kept out of garbage collection while the
workers live (a full collection in the parent would otherwise copy every inherited page it visits)."""

from __future__ import annotations

import gc

import pytest

from pipeline_lib.data.chunk_map import map_chunks


def _sum_and_len(chunk: list[int]) -> tuple[int, int]:
    return sum(chunk), len(chunk)


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_input_order(workers: int):
    out = list(map_chunks(_sum_and_len, range(1000), workers=workers, chunk_size=7))
    expected = [(sum(range(i, min(i + 7, 1000))), min(7, 1000 - i)) for i in range(0, 1000, 7)]
    assert out == expected


def test_fork_time_objects_stay_frozen_while_the_workers_live():
    assert gc.get_freeze_count() == 0
    seen = []
    for _ in map_chunks(_sum_and_len, range(100), workers=2, chunk_size=10):
        seen.append(gc.get_freeze_count())
    assert len(seen) == 10 and min(seen) > 0  # the parent's objects from before the fork
    assert gc.get_freeze_count() == 0  # unfrozen once the pool is closed


def test_an_abandoned_iteration_unfreezes_too():
    results = map_chunks(_sum_and_len, range(100), workers=2, chunk_size=10)
    next(results)
    assert gc.get_freeze_count() > 0
    results.close()
    assert gc.get_freeze_count() == 0
