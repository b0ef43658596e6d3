"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/data/subword.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_lib.data import subword

# -- BPE / SentencePiece application (pipeline_lib/data/subword.py) ------------------------------

# Hand-written subword-nmt codes: "l o" then "lo w</w>", so "low" is one unit. The vocabulary saw
# "lo@@" and "w" 5 times each, never "low": a threshold splits "low" back into units it saw.
CODES = "#version: 0.2\nl o\nlo w</w>\n"
VOCAB = "lo@@ 5\nw 5\nl@@ 9\no@@ 9\n"


@pytest.fixture
def bpe_model(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "codes").write_text(CODES, encoding="utf-8")
    (tmp_path / "vocab").write_text(VOCAB, encoding="utf-8")
    return tmp_path / "codes", tmp_path / "vocab"


@pytest.mark.parametrize(
    ("with_vocab", "threshold", "want"),
    [
        (False, 0, "low l@@ o"),
        (True, 0, "low l@@ o"),  # threshold 0: no filtering, even with a vocabulary file
        (False, 50, "low l@@ o"),  # no vocabulary file: nothing to filter with
        (True, 1, "lo@@ w l@@ o"),  # "low" was never seen
        (True, 6, "l@@ o@@ w l@@ o"),  # "lo@@" seen 5 < 6 times
    ],
)
def test_bpe_vocabulary_threshold_by_hand(bpe_model, with_vocab: bool, threshold: int, want: str) -> None:
    codes, vocab = bpe_model
    subword.init_segmenter("bpe", str(codes), str(vocab) if with_vocab else None, threshold)
    assert subword.segment_chunk(["low lo"]) == ((want + "\n").encode(), 1)


def test_segment_file_counts_every_chunk_and_defaults_to_no_threshold(bpe_model, tmp_path: Path) -> None:
    codes, vocab = bpe_model
    src = tmp_path / "in.txt"
    src.write_text("low\nlo\nlow lo\nslow\nl\n", encoding="utf-8")
    plain, with_vocab, no_vocab = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert subword.segment_file(src, plain, kind="bpe", model_path=codes, chunk_size=2) == 5
    assert subword.segment_file(src, with_vocab, kind="bpe", model_path=codes, vocab_path=vocab) == 5
    assert subword.segment_file(src, no_vocab, kind="bpe", model_path=codes, threshold=50) == 5
    assert plain.read_text(encoding="utf-8") == "low\nl@@ o\nlow l@@ o\ns@@ low\nl\n"
    assert with_vocab.read_bytes() == no_vocab.read_bytes() == plain.read_bytes()


def test_sentencepiece_segmenter_round_trips(tmp_path: Path) -> None:
    import sentencepiece as spm

    text = tmp_path / "train.txt"
    text.write_text("the lower newest widest lowest newer wider\n" * 50, encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "m"), vocab_size=30, model_type="bpe", minloglevel=2
    )
    subword.init_segmenter("spm", str(tmp_path / "m.model"), None, 0)
    data, n = subword.segment_chunk(["the newest", "wider lower"])
    lines = data.decode("utf-8").splitlines()
    assert n == 2 and len(lines) == 2
    for line, original in zip(lines, ["the newest", "wider lower"], strict=True):
        pieces = line.split(" ")
        assert len(pieces) > 2  # segmented, space-separated pieces
        assert "".join(pieces).replace("\u2581", " ").strip() == original
