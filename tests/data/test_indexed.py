"""Vocabulary and memory-mapped dataset contract (read by trainer and decoder)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data.indexed import IndexedDataset, IndexedDatasetWriter, ParallelCorpus, write_dataset
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.errors import InputError


def test_vocabulary_ids_order_and_file(tmp_path: Path) -> None:
    v = Vocabulary.build(Counter({"b": 5, "a": 5, "c": 9, "rare": 1}), threshold=2)
    assert (v.pad, v.bos, v.eos, v.unk) == (0, 1, 2, 3)
    assert v.tokens == ["c", "a", "b"] and len(v) == 7
    assert v.encode(["a", "rare", "c"]) == [5, 3, 4]
    assert v.decode([1, 5, 3, 4, 2, 0]) == ["a", "<unk>", "c"]
    assert v.string([4, 6, 2]) == "c b"
    v.save(tmp_path / "vocab.txt")
    content = (tmp_path / "vocab.txt").read_bytes()
    assert content == b"c 9\na 5\nb 5\n"
    assert v.sha256() == hashlib.sha256(content).hexdigest()
    assert Vocabulary.load(tmp_path / "vocab.txt") == v
    assert Vocabulary.build(Counter({"x": 3, "y": 2, "z": 1}), nwords=2).tokens == ["x", "y"]


def test_vocabulary_bad_file(tmp_path: Path) -> None:
    (tmp_path / "vocab.txt").write_text("a 3\nbroken\n")
    with pytest.raises(InputError, match=r"vocab\.txt:2: expected 'token count'"):
        Vocabulary.load(tmp_path / "vocab.txt")


def test_indexed_roundtrip_is_mmapped(tmp_path: Path) -> None:
    sents = [[4, 5, 6], [], [7], list(range(4, 104))]
    assert write_dataset(tmp_path / "train.en", sents) == 4
    ds = IndexedDataset(tmp_path / "train.en")
    assert len(ds) == 4 and ds.num_tokens == 104
    assert [d.tolist() for d in ds] == sents
    assert ds[-1].dtype == np.int32 and ds.sizes.tolist() == [3, 0, 1, 100]
    assert isinstance(ds.ids, np.memmap)
    assert np.load(tmp_path / "train.en.offsets.npy").dtype == np.int64


def test_writer_failure_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), IndexedDatasetWriter(tmp_path / "x") as w:
        w.add([4, 5])
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_parallel_corpus_length_mismatch(tmp_path: Path) -> None:
    write_dataset(tmp_path / "valid.en", [[4], [5]])
    write_dataset(tmp_path / "valid.fr", [[4]])
    with pytest.raises(InputError, match="split 'valid' has 2 en sentences but 1 fr"):
        ParallelCorpus(tmp_path, "valid", "en", "fr")
    write_dataset(tmp_path / "valid.fr", [[6, 7], [8]])
    pc = ParallelCorpus(tmp_path, "valid", "en", "fr")
    assert pc.src_sizes.tolist() == [1, 1] and pc.tgt_sizes.tolist() == [2, 1]
    assert [a.tolist() for a in pc[0]] == [[4], [6, 7]]


def test_truncated_dataset_detected(tmp_path: Path) -> None:
    write_dataset(tmp_path / "t.en", [[4, 5], [6]])
    np.save(tmp_path / "t.en.ids.npy", np.array([4, 5], dtype=np.int32))
    with pytest.raises(InputError, match="truncated or mismatched"):
        IndexedDataset(tmp_path / "t.en")


def test_add_many_writes_the_same_files_as_add(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    sentences = [rng.integers(0, 5000, size=int(n)).tolist() for n in rng.integers(0, 40, size=300)]
    with IndexedDatasetWriter(tmp_path / "one") as w:
        for s in sentences:
            w.add(s)
    with IndexedDatasetWriter(tmp_path / "many") as w:
        w.add_many(iter(sentences), batch=7)
    for suffix in (".ids.npy", ".offsets.npy"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"many{suffix}").read_bytes()
    with pytest.raises(ValueError, match="int32"), IndexedDatasetWriter(tmp_path / "bad") as w:
        w.add_many([[1, 2], [-1]])
