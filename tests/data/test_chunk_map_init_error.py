"""A worker pool whose initializer fails stops with the initializer's error.

multiprocessing.Pool replaces a worker whose initializer raises with a new one, forever: a segmenter
that could not load its model (SentencePiece given BPE codes) spawned over 1,000 workers in 25 s and
never finished (found by `make mutate`, docs/mutation.md). The error must surface exactly as with
one in-process worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_lib.data.chunk_map import map_chunks
from pipeline_lib.data.subword import segment_file


def _failing_init(message: str) -> None:
    raise ValueError(message)


def _identity(chunk: list[int]) -> list[int]:
    return chunk


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2])
def test_an_initializer_error_is_raised_not_respawned(workers: int) -> None:
    with pytest.raises(ValueError, match="cannot load the model"):
        list(map_chunks(_identity, range(100), workers=workers, chunk_size=10,
                        initializer=_failing_init, initargs=("cannot load the model",)))  # fmt: skip


@pytest.mark.timeout(60)
def test_segmenting_with_a_model_that_does_not_load_fails_alike_for_any_worker_count(tmp_path: Path) -> None:
    src = tmp_path / "train.en"
    src.write_text("a small line\n" * 50, encoding="utf-8")
    codes = tmp_path / "codes"  # BPE codes, not a SentencePiece model
    codes.write_text("#version: 0.2\na b\n", encoding="utf-8")
    errors = []
    for workers in (1, 2):
        with pytest.raises(Exception) as info:  # noqa: B017 (the type is compared below)
            segment_file(
                src, tmp_path / f"out{workers}", kind="spm", model_path=codes, workers=workers, chunk_size=5
            )
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]
