"""Property: text -> Moses tokenization -> BPE -> BPE removal -> Moses detokenization gives the
text back, for sentences of plain words and sentence punctuation (what the round trip must keep);
and BPE removal alone inverts BPE exactly on any tokenized line."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from subword_nmt import apply_bpe, learn_bpe

from pipeline_lib.data.detok import moses_detokenize, postprocess_subwords
from pipeline_lib.data.moses import LinePreprocessor, TokConfig

CORPUS = [
    "the",
    "lower",
    "newest",
    "widest",
    "lowest",
    "newer",
    "wider",
    "and",
    "then",
    "there",
    "were",
    "others",
    "talking",
    "walking",
]
FAST = settings(max_examples=40, deadline=None, derandomize=True, database=None)

word = st.text("abcdefghilmnorstuwy", min_size=1, max_size=9)
punct = st.sampled_from(["", "", ",", ".", "!", "?"])
sentence = st.lists(st.tuples(word, punct), min_size=1, max_size=8).map(
    lambda ws: " ".join(w + p for w, p in ws)
)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> apply_bpe.BPE:
    root: Path = tmp_path_factory.mktemp("bpe_props")
    (root / "train").write_text("\n".join(CORPUS * 3) + "\n", encoding="utf-8")
    with (
        codecs.open(str(root / "train"), encoding="utf-8") as inp,
        codecs.open(str(root / "codes"), "w", encoding="utf-8") as out,
    ):
        learn_bpe.learn_bpe(inp, out, 40, min_frequency=2)
    with codecs.open(str(root / "codes"), encoding="utf-8") as codes:
        return apply_bpe.BPE(codes)


@pytest.fixture(scope="module")
def tokenize() -> LinePreprocessor:
    return LinePreprocessor("en", TokConfig())


@FAST
@given(sentence)
def test_tokenize_bpe_detokenize_round_trip(bpe, tokenize, text: str) -> None:
    tokens = tokenize(text)
    segmented = " ".join(bpe.segment_tokens(tokens.split()))
    assert postprocess_subwords(segmented, "bpe") == tokens
    assert moses_detokenize([postprocess_subwords(segmented, "bpe")], "en") == [text]


@FAST
@given(
    st.lists(
        st.text(st.characters(blacklist_categories=["Z", "C"]), min_size=1, max_size=12),
        min_size=1,
        max_size=10,
    )
)
def test_bpe_removal_inverts_bpe_on_any_tokens(bpe, tokens: list[str]) -> None:
    tokens = [t for t in tokens if not t.endswith("@@")]  # a literal "@@" word ending is ambiguous by design
    segmented = " ".join(bpe.segment_tokens(tokens))
    assert postprocess_subwords(segmented, "bpe") == " ".join(tokens)
