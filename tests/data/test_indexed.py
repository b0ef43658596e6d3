"""Vocabulary and memory-mapped dataset contract (read by trainer and decoder)."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data.indexed import (
    IndexedDataset,
    IndexedDatasetWriter,
    ParallelCorpus,
    dataset_exists,
    split_prefix,
    write_dataset,
)
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


# -- What the round trips above leave open (make mutate MODULE=indexed, docs/mutation.md) ------------
# Oracles: numpy's own np.save/np.load for the files, arrays and messages written out by hand.

SENTS = [[4, 5, 6], [], [7]]


def test_the_files_are_what_np_save_writes(tmp_path: Path) -> None:
    assert write_dataset(tmp_path / "d", SENTS) == 3
    np.save(tmp_path / "ref_ids.npy", np.array([4, 5, 6, 7], dtype=np.int32))
    np.save(tmp_path / "ref_off.npy", np.array([0, 3, 3, 4], dtype=np.int64))
    assert (tmp_path / "d.ids.npy").read_bytes() == (tmp_path / "ref_ids.npy").read_bytes()
    assert (tmp_path / "d.offsets.npy").read_bytes() == (tmp_path / "ref_off.npy").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "d.ids.npy",
        "d.offsets.npy",
        "ref_ids.npy",
        "ref_off.npy",
    ]


def test_dataset_reads_by_index_from_either_end(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", SENTS)
    ds = IndexedDataset(tmp_path / "d")
    assert ds.prefix == str(tmp_path / "d")
    assert [ds[i].tolist() for i in (0, 1, 2, -1, -2, -3)] == [[4, 5, 6], [], [7], [7], [], [4, 5, 6]]
    for i, shown in ((3, 3), (-4, -1), (10, 10)):
        with pytest.raises(IndexError) as err:
            ds[i]
        assert str(err.value) == f"index {shown} out of range for 3 sentences"
    first = ds[0]
    first[0] = 99  # a copy, not a view into the mmap
    assert ds[0].tolist() == [4, 5, 6] and not isinstance(first, np.memmap)
    assert ds.offsets.tolist() == [0, 3, 3, 4] and ds.ids.tolist() == [4, 5, 6, 7]
    assert isinstance(ds.offsets, np.memmap)  # both files mapped, never read whole into memory
    assert ds.sizes.dtype == np.int64 and ds.sizes.tolist() == [3, 0, 1]


def _npy(tmp_path: Path, ids: np.ndarray, offsets: np.ndarray) -> Path:
    np.save(tmp_path / "d.ids.npy", ids)
    np.save(tmp_path / "d.offsets.npy", offsets)
    return tmp_path / "d"


@pytest.mark.parametrize(
    ("ids", "offsets", "message"),
    [
        (np.array([[4, 5]], dtype=np.int32), np.array([0, 2]), "{ids}: expected 1-D int32, got 2-D int32"),
        (np.array([4, 5], dtype=np.int64), np.array([0, 2]), "{ids}: expected 1-D int32, got 1-D int64"),
        (np.array([4, 5], dtype=np.int32), np.array([0, 2], dtype=np.int32), "{off}: expected non-empty 1-D int64 offsets"),
        (np.array([4, 5], dtype=np.int32), np.array([[0, 2]]), "{off}: expected non-empty 1-D int64 offsets"),
        (np.array([], dtype=np.int32), np.array([], dtype=np.int64), "{off}: expected non-empty 1-D int64 offsets"),
        (np.array([4, 5], dtype=np.int32), np.array([1, 2]),
         "{off}: offsets span [1, 2] but {ids} holds 2 ids (truncated or mismatched files)"),
        (np.array([4, 5], dtype=np.int32), np.array([0, 1]),
         "{off}: offsets span [0, 1] but {ids} holds 2 ids (truncated or mismatched files)"),
    ],
)  # fmt: skip
def test_a_malformed_dataset_names_its_file(tmp_path: Path, ids, offsets, message: str) -> None:
    prefix = _npy(tmp_path, ids, offsets)
    with pytest.raises(InputError) as err:
        IndexedDataset(prefix)
    assert str(err.value) == message.format(ids=f"{prefix}.ids.npy", off=f"{prefix}.offsets.npy")


def test_an_empty_dataset_is_valid(tmp_path: Path) -> None:
    ds = IndexedDataset(_npy(tmp_path, np.array([], dtype=np.int32), np.array([0], dtype=np.int64)))
    assert len(ds) == 0 and ds.num_tokens == 0 and list(ds) == []


def test_missing_or_unreadable_files(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", SENTS)
    assert dataset_exists(tmp_path / "d") and not dataset_exists(tmp_path / "e")
    (tmp_path / "d.offsets.npy").unlink()
    assert not dataset_exists(tmp_path / "d")
    with pytest.raises(InputError) as err:
        IndexedDataset(tmp_path / "d")
    assert str(err.value) == f"{tmp_path}/d.offsets.npy: binarized dataset file not found"
    write_dataset(tmp_path / "f", SENTS)
    (tmp_path / "f.ids.npy").unlink()
    assert not dataset_exists(tmp_path / "f")
    with pytest.raises(InputError) as err:
        IndexedDataset(tmp_path / "f")
    assert str(err.value) == f"{tmp_path}/f.ids.npy: binarized dataset file not found"
    (tmp_path / "f.ids.npy").write_bytes(b"not numpy")
    with pytest.raises(InputError, match=rf"^{tmp_path}/f: not a valid \.npy dataset \("):
        IndexedDataset(tmp_path / "f")


def test_writer_refuses_what_int32_cannot_hold(tmp_path: Path) -> None:
    top = 2**31 - 1
    with IndexedDatasetWriter(tmp_path / "d") as w:
        w.add([0, top])
        w.add([])
        w.add_arrays(np.array([top, 0, 9]), np.array([2, 0, 1]))
        for bad in ([-1], [top + 1], [[1, 2]]):
            with pytest.raises(ValueError):
                w.add(bad)
        for ids, lengths in (
            (np.array([-1]), np.array([1])),
            (np.array([top + 1]), np.array([1])),
            (np.array([1, 2]), np.array([1])),  # lengths sum to 1, two ids
            (np.array([1, 2]), np.array([3, -1])),
            (np.array([[1, 2]]), np.array([2])),
            (np.array([1, 2]), np.array([[2]])),
        ):
            with pytest.raises(ValueError):
                w.add_arrays(ids, lengths)
        assert (len(w), w.num_tokens) == (5, 5)
    ds = IndexedDataset(tmp_path / "d")
    assert [x.tolist() for x in ds] == [[0, top], [], [top, 0], [], [9]]
    assert ds.offsets.tolist() == [0, 2, 2, 4, 4, 5]


def test_add_arrays_takes_int32_lengths(tmp_path: Path) -> None:
    """binarize's workers send int32 ids; offsets stay int64 whatever the lengths' dtype."""
    with IndexedDatasetWriter(tmp_path / "d") as w:
        w.add([9])
        w.add_arrays(np.array([4, 5, 6], dtype=np.int32), np.array([2, 1], dtype=np.int32))
    assert np.load(tmp_path / "d.offsets.npy").tolist() == [0, 1, 3, 4]
    assert [x.tolist() for x in IndexedDataset(tmp_path / "d")] == [[9], [4, 5], [6]]


def test_writer_messages(tmp_path: Path) -> None:
    with IndexedDatasetWriter(tmp_path / "d") as w:
        with pytest.raises(ValueError) as err:
            w.add([[1]])
        assert str(err.value) == "a sentence must be a 1-D sequence of ids"
        with pytest.raises(ValueError) as err:
            w.add([2**31])
        assert str(err.value) == "token id out of int32 range"
        with pytest.raises(ValueError) as err:
            w.add_arrays(np.array([2**31]), np.array([1]))
        assert str(err.value) == "token id out of int32 range"
        with pytest.raises(ValueError) as err:
            w.add_arrays(np.array([1]), np.array([2]))
        assert str(err.value) == "ids must be the concatenation of sentences of the given lengths"


def test_finalize_and_abort_run_once_and_leave_no_scratch(tmp_path: Path) -> None:
    w = IndexedDatasetWriter(tmp_path / "sub" / "deeper" / "d")  # makes its folders
    w.add([4])
    w.finalize()
    w.finalize()
    w.abort()  # after finalize: keeps the files
    assert sorted(p.name for p in (tmp_path / "sub" / "deeper").iterdir()) == ["d.ids.npy", "d.offsets.npy"]
    assert IndexedDataset(tmp_path / "sub" / "deeper" / "d")[0].tolist() == [4]
    w = IndexedDatasetWriter(tmp_path / "e")
    w.add([4])
    w.abort()
    w.abort()
    w.finalize()  # after abort: writes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


def test_add_many_in_batches_of_any_size(tmp_path: Path) -> None:
    for batch in (1, 2, 4096):
        with IndexedDatasetWriter(tmp_path / f"b{batch}") as w:
            w.add_many(iter(SENTS + [[8, 9]]), batch=batch)
        assert [x.tolist() for x in IndexedDataset(tmp_path / f"b{batch}")] == [*SENTS, [8, 9]]


def test_parallel_corpus_fields_and_prefixes(tmp_path: Path) -> None:
    assert split_prefix(tmp_path, "valid", "en") == f"{tmp_path}/valid.en"
    write_dataset(tmp_path / "valid.en", [[4], [5, 6]])
    write_dataset(tmp_path / "valid.fr", [[7, 8, 9], [10]])
    pc = ParallelCorpus(tmp_path, "valid", "en", "fr")
    assert (pc.bin_dir, pc.split, pc.src_lang, pc.tgt_lang, len(pc)) == (
        str(tmp_path),
        "valid",
        "en",
        "fr",
        2,
    )
    assert (pc.src.prefix, pc.tgt.prefix) == (f"{tmp_path}/valid.en", f"{tmp_path}/valid.fr")
    assert [a.tolist() for a in pc[1]] == [[5, 6], [10]]
    assert pc.src_sizes.tolist() == [1, 2] and pc.tgt_sizes.tolist() == [3, 1]


def test_a_failed_finalize_keeps_its_error_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    def full_disk(*args) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"), IndexedDatasetWriter(tmp_path / "d") as w:
        w.add([4])
        monkeypatch.setattr(IndexedDatasetWriter, "_raw_to_npy", staticmethod(full_disk))
        w.finalize()  # removes the scratch files, then the abort on the way out finds none
    assert list(tmp_path.iterdir()) == []
