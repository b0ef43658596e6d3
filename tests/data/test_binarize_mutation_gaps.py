"""Mutation gaps of binarize (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: a two-sentence corpus whose joint vocabulary, ids, statistics and
meta.json are worked out by hand below, hashlib over the written files, numpy's own np.load."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data.binarize import BinarizeSettings, binarize
from pipeline_lib.errors import ConfigError, InputError

# Joint counts of train.en + train.fr: a 4, y 2, b 1, c 1, x 1, z 1: most frequent first, ties by
# token, after the four specials (pad 0, bos 1, eos 2, unk 3): a 4, y 5, b 6, c 7, x 8, z 9.
TEXT = {
    "train.en": "a b a\nc a\n",
    "train.fr": "x a\ny y z\n",
    "valid.en": "a q\n",  # q: unknown
    "valid.fr": "y\n",
}
VOCAB_TXT = "a 4\ny 2\nb 1\nc 1\nx 1\nz 1\n"


def corpus(root: Path, text: dict[str, str] = TEXT, meta: dict | None = None) -> Path:
    in_dir = root / "in"
    in_dir.mkdir(parents=True, exist_ok=True)
    for name, body in text.items():
        (in_dir / name).write_text(body, encoding="utf-8")
    if meta is not None:
        (in_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return in_dir


def run(root: Path, in_dir: Path, **kw) -> Path:
    out = root / "out"
    fields = dict(in_dir=in_dir, out_dir=out, src="en", tgt="fr", splits=("train", "valid"))
    binarize(BinarizeSettings(**{**fields, **kw}))
    return out


def ids(out: Path, prefix: str) -> list[list[int]]:
    flat = np.load(out / f"{prefix}.ids.npy")
    offsets = np.load(out / f"{prefix}.offsets.npy")
    assert flat.dtype == np.int32 and offsets.dtype == np.int64
    return [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def side_digest(out: Path, prefix: str) -> str:
    """binarize's per-side digest: sha256 over the hex digests of the ids file, then the offsets file."""
    return hashlib.sha256(
        (sha(out / f"{prefix}.ids.npy") + sha(out / f"{prefix}.offsets.npy")).encode()
    ).hexdigest()


@pytest.mark.parametrize("workers, chunk_size", [(1, 5000), (2, 1)])
def test_a_parallel_corpus_by_hand(tmp_path: Path, workers: int, chunk_size: int) -> None:
    meta_in = {
        "subword": "bpe",
        "model": "codes.bpe",
        "moses_tokenized": True,
        "aggressive_dash_splits": True,
    }
    in_dir = corpus(tmp_path, meta=meta_in)
    (in_dir / "codes.bpe").write_text("#version: 0.2\na b\n", encoding="utf-8")
    out = run(tmp_path, in_dir, workers=workers, chunk_size=chunk_size)
    assert (out / "vocab.txt").read_text(encoding="utf-8") == VOCAB_TXT
    assert ids(out, "train.en") == [[4, 6, 4], [7, 4]]
    assert ids(out, "train.fr") == [[8, 4], [5, 5, 9]]
    assert ids(out, "valid.en") == [[4, 3]] and ids(out, "valid.fr") == [[5]]
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta == {
        "src_lang": "en",
        "tgt_lang": "fr",
        "vocab_sha256": sha(out / "vocab.txt"),
        "vocab_size": 10,
        "vocab_threshold": 0,
        "vocab_reused_from": None,
        "subword": "bpe",
        "subword_model": "subword/codes.bpe",
        "moses_tokenized": True,
        "aggressive_dash_splits": True,
        "eos_stored": False,
        "splits": {
            "train": {
                "pairs": 2,
                "en_sha256": side_digest(out, "train.en"), "en_tokens": 5, "en_unk": 0, "en_unk_rate": 0.0,
                "fr_sha256": side_digest(out, "train.fr"), "fr_tokens": 5, "fr_unk": 0, "fr_unk_rate": 0.0,
            },
            "valid": {
                "pairs": 1,
                "en_sha256": side_digest(out, "valid.en"), "en_tokens": 2, "en_unk": 1, "en_unk_rate": 0.5,
                "fr_sha256": side_digest(out, "valid.fr"), "fr_tokens": 1, "fr_unk": 0, "fr_unk_rate": 0.0,
            },
        },
        "file_bytes": {
            f"{s}.{lang}.{kind}.npy": (out / f"{s}.{lang}.{kind}.npy").stat().st_size
            for s in ("train", "valid") for lang in ("en", "fr") for kind in ("ids", "offsets")
        },
    }  # fmt: skip
    assert (out / "subword" / "codes.bpe").read_text(encoding="utf-8") == "#version: 0.2\na b\n"
    assert json.loads((out / "subword" / "meta.json").read_text(encoding="utf-8")) == meta_in
    assert sorted(p.name for p in out.iterdir() if "binarizing" in p.name) == []


def test_a_monolingual_corpus_counts_sentences(tmp_path: Path) -> None:
    out = run(tmp_path, corpus(tmp_path), tgt=None, splits=("train",))
    assert (out / "vocab.txt").read_text(encoding="utf-8") == "a 3\nb 1\nc 1\n"
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert meta["tgt_lang"] is None and meta["subword"] == "none" and meta["subword_model"] is None
    assert meta["moses_tokenized"] is False and meta["aggressive_dash_splits"] is False
    assert meta["splits"] == {
        "train": {"sentences": 2, "en_sha256": side_digest(out, "train.en"), "en_tokens": 5, "en_unk": 0,
                  "en_unk_rate": 0.0}
    }  # fmt: skip
    assert not (out / "subword").exists()


@pytest.mark.parametrize(
    "threshold, nwords, vocab_txt, train_en, unk",
    [
        (2, -1, "a 4\ny 2\n", [[4, 3, 4], [3, 4]], 2),  # tokens seen at least twice
        (1, -1, VOCAB_TXT, [[4, 6, 4], [7, 4]], 0),
        (0, 1, "a 4\n", [[4, 3, 4], [3, 4]], 2),  # the most frequent one only
        (0, 0, None, None, None),  # nothing left: an error
    ],
)
def test_threshold_and_nwords(tmp_path: Path, threshold, nwords, vocab_txt, train_en, unk) -> None:
    in_dir = corpus(tmp_path)
    if vocab_txt is None:
        with pytest.raises(InputError, match=rf"{in_dir}: the vocabulary is empty \(threshold 0\)"):
            run(tmp_path, in_dir, threshold=threshold, nwords=nwords)
        return
    out = run(tmp_path, in_dir, threshold=threshold, nwords=nwords)
    assert (out / "vocab.txt").read_text(encoding="utf-8") == vocab_txt
    assert ids(out, "train.en") == train_en
    train = json.loads((out / "meta.json").read_text(encoding="utf-8"))["splits"]["train"]
    assert train["en_unk"] == unk and train["en_unk_rate"] == unk / 5
    assert json.loads((out / "meta.json").read_text(encoding="utf-8"))["vocab_threshold"] == threshold


def test_a_reused_vocabulary_is_recorded_and_not_rebuilt(tmp_path: Path) -> None:
    vocab = tmp_path / "given.txt"
    vocab.write_text("y 9\nq 1\n", encoding="utf-8")  # y 4, q 5; the corpus's own counts play no part
    text = {"test.en": "q a\n", "test.fr": "y\n"}  # no train split needed
    out = run(tmp_path, corpus(tmp_path, text), splits=("test",), vocab=vocab)
    assert (out / "vocab.txt").read_text(encoding="utf-8") == "y 9\nq 1\n"
    assert ids(out, "test.en") == [[5, 3]] and ids(out, "test.fr") == [[4]]
    assert json.loads((out / "meta.json").read_text(encoding="utf-8"))["vocab_reused_from"] == str(vocab)


def test_bad_inputs_name_the_file_and_line(tmp_path: Path) -> None:
    in_dir = corpus(tmp_path, {**TEXT, "valid.fr": "y\nz\nz\n"})
    with pytest.raises(InputError, match=rf"^{in_dir / 'valid.fr'}:2: line-count mismatch \(1 vs 3 lines\)$"):
        run(tmp_path, in_dir)
    in_dir = corpus(tmp_path / "b", {**TEXT, "valid.en": "a\nb\n"})
    with pytest.raises(InputError, match=rf"^{in_dir / 'valid.en'}:2: line-count mismatch \(2 vs 1 lines\)$"):
        run(tmp_path / "b", in_dir)
    in_dir = corpus(tmp_path / "c", {k: v for k, v in TEXT.items() if k != "valid.fr"})
    with pytest.raises(InputError, match=rf"^{in_dir / 'valid.fr'}: not found$"):
        run(tmp_path / "c", in_dir)
    in_dir = corpus(tmp_path / "d", {"test.en": "a\n", "test.fr": "b\n"})
    with pytest.raises(InputError, match=rf"^{in_dir / 'train.en'}: needed to build the vocabulary"):
        run(tmp_path / "d", in_dir, splits=("test",))
    with pytest.raises(ConfigError, match="--src and --tgt must differ"):
        BinarizeSettings(in_dir=tmp_path, out_dir=tmp_path, src="en", tgt="en")


def test_the_settings_defaults() -> None:
    cfg = BinarizeSettings(in_dir=Path("i"), out_dir=Path("o"), src="en")
    assert (cfg.tgt, cfg.threshold, cfg.nwords, cfg.splits, cfg.vocab) == (
        None,
        0,
        -1,
        ("train", "valid", "test"),
        None,
    )
    assert (cfg.workers, cfg.chunk_size) == (1, 5000)


def test_the_vocabulary_comes_from_train_when_only_valid_is_binarized(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="pipeline_lib.data.binarize"):
        out = run(tmp_path, corpus(tmp_path), splits=("valid",))
    assert (out / "vocab.txt").read_text(encoding="utf-8") == VOCAB_TXT
    assert ids(out, "valid.en") == [[4, 3]]
    assert "vocabulary: 10 types (incl. 4 specials)" in [r.getMessage() for r in caplog.records]


def test_a_split_of_empty_lines_has_no_unk_rate_to_divide(tmp_path: Path, caplog) -> None:
    in_dir = corpus(tmp_path, {**TEXT, "valid.en": "\n\n", "valid.fr": "\n\n"})
    out_dir = tmp_path / "deep" / "er" / "out"  # parents made too
    with caplog.at_level(logging.INFO, logger="pipeline_lib.data.binarize"):
        binarize(BinarizeSettings(in_dir=in_dir, out_dir=out_dir, src="en", tgt="fr", splits=("valid",)))
    valid = json.loads((out_dir / "meta.json").read_text(encoding="utf-8"))["splits"]["valid"]
    assert (valid["pairs"], valid["en_tokens"], valid["en_unk_rate"], valid["fr_unk_rate"]) == (
        2,
        0,
        0.0,
        0.0,
    )
    assert ids(out_dir, "valid.en") == [[], []]
    assert any(r.getMessage().startswith("valid: {'pairs': 2, 'en_sha256': ") for r in caplog.records)


def test_a_bad_setting_names_its_flag() -> None:
    with pytest.raises(ConfigError, match="--threshold"):
        BinarizeSettings(in_dir=Path("i"), out_dir=Path("o"), src="en", threshold=-1)


def test_unknowns_are_summed_over_chunks(tmp_path: Path) -> None:
    in_dir = corpus(tmp_path, {**TEXT, "valid.en": "q a\nr\n", "valid.fr": "y\ny\n"})  # q, r: unknown
    out = run(tmp_path, in_dir, chunk_size=1)  # one line per chunk
    valid = json.loads((out / "meta.json").read_text(encoding="utf-8"))["splits"]["valid"]
    assert (valid["en_unk"], valid["en_tokens"], valid["en_unk_rate"]) == (2, 3, 2 / 3)
