"""apply-bpe --vocab-threshold N produces only subwords seen >= N times in that language's segmented
training text (subword-nmt's --vocabulary-threshold): the output equals subword-nmt's own BPE with
the filtered vocabulary, and differs from the unfiltered output on this corpus."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import numpy as np
import pytest
from subword_nmt import apply_bpe

from pipeline_lib.cli import main

# Frequent stems merge into whole words; their rarer relatives reuse those merges but are seen
# only a few times, so a threshold splits them again.
COMMON = ["lower", "newest", "widest", "lowest", "newer", "wider", "the", "and"]
RARE = ["slower", "renewed", "widen", "lowland"]


def write_corpus(tok: Path) -> None:
    rng = np.random.default_rng(0)
    tok.mkdir()
    for lang, shift in (("en", 0), ("fr", 3)):
        words = COMMON[shift:] + COMMON[:shift]
        weights = 1.0 / np.arange(1, len(words) + 1)
        train = [" ".join(rng.choice(words, size=6, p=weights / weights.sum())) for _ in range(120)]
        train += [" ".join(RARE[i % len(RARE)] for i in range(j, j + 3)) for j in range(4)]
        test = [" ".join(rng.choice(COMMON + RARE, size=8)) for _ in range(30)]
        (tok / f"train.{lang}").write_text("\n".join(train) + "\n", encoding="utf-8")
        (tok / f"test.{lang}").write_text("\n".join(test) + "\n", encoding="utf-8")


def subword_nmt_reference(codes: Path, vocab: Path | None, threshold: int, lines: list[str]) -> list[str]:
    filtered = None
    if vocab is not None:
        with codecs.open(str(vocab), encoding="utf-8") as handle:
            filtered = apply_bpe.read_vocabulary(handle, threshold)
    with codecs.open(str(codes), encoding="utf-8") as handle:
        bpe = apply_bpe.BPE(handle, vocab=filtered)
    return [" ".join(bpe.segment_tokens(line.split())) for line in lines]


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bpe_threshold")
    tok, model = root / "tok", root / "sw"
    write_corpus(tok)
    args = ["learn-bpe", "--in-dir", str(tok), "--src", "en", "--tgt", "fr", "--model-dir", str(model)]
    assert main([*args, "--merges", "60", "--workers", "1"]) == 0
    return tok, model


def apply(tok: Path, model: Path, out: Path, threshold: int) -> None:
    args = ["apply-bpe", "--in-dir", str(tok), "--model-dir", str(model), "--out-dir", str(out)]
    assert (
        main([*args, "--src", "en", "--tgt", "fr", "--workers", "1", "--vocab-threshold", str(threshold)])
        == 0
    )


def test_vocab_threshold_matches_subword_nmt(learned, tmp_path: Path) -> None:
    tok, model = learned
    codes = model / json.loads((model / "subword.json").read_text())["codes"]
    apply(tok, model, tmp_path / "plain", 0)
    apply(tok, model, tmp_path / "filtered", 5)
    assert json.loads((tmp_path / "filtered" / "meta.json").read_text())["vocab_threshold"] == 5
    changed = 0
    for split in ("train", "test"):
        for lang in ("en", "fr"):
            lines = (tok / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            plain = (tmp_path / "plain" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            filtered = (tmp_path / "filtered" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            assert plain == subword_nmt_reference(codes, None, 0, lines)
            assert filtered == subword_nmt_reference(codes, model / f"vocab.{lang}", 5, lines)
            changed += sum(a != b for a, b in zip(plain, filtered, strict=True))
    assert changed > 0, "the threshold changes nothing on this corpus: the test would not see it ignored"
