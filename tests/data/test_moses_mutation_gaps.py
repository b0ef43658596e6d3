"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/data/moses.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import pytest

from pipeline_lib.data.moses import (
    CleanConfig,
    LinePreprocessor,
    TokConfig,
    clean_reason,
    init_worker,
    mono_clean_reason,
    process_chunk,
)
from pipeline_lib.errors import ConfigError

# -- Moses preprocessing and clean-corpus-n (pipeline_lib/data/moses.py) -------------------------


@pytest.mark.parametrize(
    "kwargs", [{"ratio": 0}, {"min_len": -1}, {"min_len": 3, "max_len": 2}, {"max_len": 0}, {"hard_limit": 0}]
)
def test_clean_config_refuses_impossible_limits(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        CleanConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"ratio": 1.0}, {"min_len": 0, "max_len": 1}, {"min_len": 5, "max_len": 5}, {"hard_limit": 1}]
)
def test_clean_config_accepts_the_tightest_valid_limits(kwargs: dict) -> None:
    CleanConfig(**kwargs)  # ratio 1: equal lengths only; min == max: one length only


def test_clean_reason_checks_each_side_and_keeps_the_bounds() -> None:
    cfg = CleanConfig(ratio=9.0, min_len=3, max_len=250)
    assert clean_reason(2, 3, cfg) == clean_reason(3, 2, cfg) == "too_short"  # one short side is enough
    assert clean_reason(251, 200, cfg) == clean_reason(200, 251, cfg) == "too_long"
    assert clean_reason(250, 250, cfg) is None and clean_reason(3, 3, cfg) is None  # the bounds are kept


def test_mono_clean_reason_keeps_the_bounds() -> None:
    cfg = CleanConfig(min_len=2, max_len=4)
    assert [mono_clean_reason(n, cfg) for n in range(6)] == [
        "empty", "too_short", None, None, None, "too_long"
    ]  # fmt: skip


def test_normalizer_follows_the_language() -> None:
    # normalize-punctuation.perl moves a period inside the closing quote for English only
    no_tok = TokConfig(tokenize=False)
    assert LinePreprocessor("en", no_tok)('He said "yes".') == 'He said "yes."'
    assert LinePreprocessor("fr", no_tok)('il a dit "oui", puis') == 'il a dit "oui", puis'


def test_non_printing_removal_with_and_without_normalization() -> None:
    zero_width = "a\u200bb \u201cx\u201d"  # U+200B is in \p{C}; the typographic quotes are punctuation
    assert LinePreprocessor("en", TokConfig(tokenize=False))(zero_width) == 'ab "x"'
    # remove-non-printing-char alone: the quotes stay typographic (no normalization)
    assert LinePreprocessor("en", TokConfig(normalize=False))(zero_width) == "ab \u201c x \u201d"


def test_tokenizer_options_escape_and_lowercase() -> None:
    assert LinePreprocessor("en", TokConfig(escape=False))("a & b") == "a & b"
    assert LinePreprocessor("en", TokConfig())("a & b") == "a &amp; b"
    assert LinePreprocessor("en", TokConfig(lowercase=True))("Hello World") == "hello world"


def test_process_chunk_hard_limit_counts_every_row_and_goes_on() -> None:
    init_worker(("en", "fr"), TokConfig(tokenize=False), CleanConfig(hard_limit=3, ratio=9.0))
    rows = [("a b c d", "x"), ("a b c", "x y z"), ("a b c d e", "x"), ("a", "b")]
    out, stats = process_chunk(rows)
    assert out == [None, ("a b c", "x y z"), None, ("a", "b")]  # exactly hard_limit tokens is kept
    assert stats == {"over_hard_limit": 2}


def test_process_chunk_monolingual_rows_are_cleaned_alone() -> None:
    init_worker(("en",), TokConfig(tokenize=False), CleanConfig(min_len=2, max_len=3))
    out, stats = process_chunk([("a",), ("a b",), ("a b c d",), ("",)])
    assert out == [None, ("a b",), None, None]
    assert stats == {"too_short": 1, "too_long": 1, "empty": 1}


def test_process_chunk_refuses_a_row_with_the_wrong_number_of_columns() -> None:
    init_worker(("en", "fr"), TokConfig(tokenize=False), None)
    with pytest.raises(ValueError):
        process_chunk([("a", "b", "c")])  # never silently cut to the languages given
