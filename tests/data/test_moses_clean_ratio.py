"""clean-corpus-n's length ratio applies both ways: a source much longer than its target is dropped
just like a target much longer than its source (clean-corpus-n.perl checks src/tgt and tgt/src)."""

from __future__ import annotations

import pytest

from pipeline_lib.data import moses
from pipeline_lib.data.moses import CleanConfig, TokConfig, clean_reason

NO_MOSES = TokConfig(normalize=False, remove_non_printing=False, tokenize=False)


@pytest.mark.parametrize(("short", "long", "ratio"), [(2, 4, 1.5), (10, 16, 1.5), (3, 10, 3.0), (1, 2, 1.9)])
def test_ratio_is_checked_in_both_directions(short: int, long: int, ratio: float) -> None:
    cfg = CleanConfig(ratio=ratio)
    assert clean_reason(long, short, cfg) == "ratio"  # the source side is the longer one
    assert clean_reason(short, long, cfg) == "ratio"


def test_ratio_boundary_is_kept_both_ways() -> None:
    cfg = CleanConfig(ratio=1.5)
    assert clean_reason(3, 2, cfg) is None and clean_reason(2, 3, cfg) is None  # exactly 1.5
    assert clean_reason(4, 4, cfg) is None


def test_preprocess_worker_drops_long_sources() -> None:
    moses.init_worker(("en", "fr"), NO_MOSES, CleanConfig(ratio=1.5))
    rows = [
        ("a b c d e f", "x y"),  # source 3x longer
        ("a b", "x y z w v u"),  # target 3x longer
        ("a b c", "x y"),  # 1.5: kept
    ]
    out, stats = moses.process_chunk(rows)
    assert out == [None, None, ("a b c", "x y")]
    assert stats == {"ratio": 2}
