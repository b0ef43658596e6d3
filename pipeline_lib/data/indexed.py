"""Memory-mapped token-id datasets: the binarized format read by the trainer and decoder.

One dataset ``prefix`` is two numpy files:

* ``{prefix}.ids.npy``     1-D ``int32``: the token ids of all sentences concatenated,
  **without** ``</s>`` (the trainer/decoder append eos/bos as they need);
* ``{prefix}.offsets.npy`` 1-D ``int64`` of length ``n + 1``: sentence ``i`` is
  ``ids[offsets[i]:offsets[i + 1]]``.

Both are opened with ``np.load(mmap_mode="r")``, so a 36M-pair corpus costs no RAM beyond
the pages actually touched. :class:`IndexedDatasetWriter` streams sentences to disk one at a
time and renames the finished files into place, so an interrupted run never leaves a
half-written dataset under the final name.

A binarized directory (written by ``python -m pipeline_lib binarize``) holds ``vocab.txt``,
``{split}.{lang}.ids.npy`` / ``{split}.{lang}.offsets.npy`` for each split and language, and
``meta.json`` (languages, vocab sha256, subword kind, Moses tokenization, per-split counts).
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from pipeline_lib.atomic import atomic_open, temp_path
from pipeline_lib.data.integrity import verify_split_dir
from pipeline_lib.errors import InputError

IDS_SUFFIX = ".ids.npy"
OFFSETS_SUFFIX = ".offsets.npy"
_COPY_BYTES = 1 << 24  # copy step when finalising


def dataset_exists(prefix: str | os.PathLike[str]) -> bool:
    prefix = str(prefix)
    return os.path.isfile(prefix + IDS_SUFFIX) and os.path.isfile(prefix + OFFSETS_SUFFIX)


class IndexedDataset:
    """Read-only, memory-mapped sequence of int32 token-id arrays."""

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        self.prefix = str(prefix)
        ids_path, off_path = self.prefix + IDS_SUFFIX, self.prefix + OFFSETS_SUFFIX
        for p in (ids_path, off_path):
            if not os.path.isfile(p):
                raise InputError(f"{p}: binarized dataset file not found")
        try:
            self._ids = np.load(ids_path, mmap_mode="r")
            self._offsets = np.load(off_path, mmap_mode="r")
        except ValueError as exc:
            raise InputError(f"{self.prefix}: not a valid .npy dataset ({exc})") from exc
        if self._ids.ndim != 1 or self._ids.dtype != np.int32:
            raise InputError(f"{ids_path}: expected 1-D int32, got {self._ids.ndim}-D {self._ids.dtype}")
        if self._offsets.ndim != 1 or self._offsets.dtype != np.int64 or len(self._offsets) < 1:
            raise InputError(f"{off_path}: expected non-empty 1-D int64 offsets")
        if int(self._offsets[0]) != 0 or int(self._offsets[-1]) != len(self._ids):
            raise InputError(
                f"{off_path}: offsets span [{int(self._offsets[0])}, {int(self._offsets[-1])}] "
                f"but {ids_path} holds {len(self._ids)} ids (truncated or mismatched files)"
            )
        self._sizes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of range for {n} sentences")
        # np.array(...) copies the slice so callers never hold a view into the mmap.
        return np.array(self._ids[self._offsets[i] : self._offsets[i + 1]])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @property
    def sizes(self) -> np.ndarray:
        """Length (in tokens, without eos) of every sentence, as an int64 array."""
        if self._sizes is None:
            self._sizes = np.diff(np.asarray(self._offsets)).astype(np.int64)
        return self._sizes

    @property
    def num_tokens(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> np.ndarray:
        """The raw memory-mapped id array (read-only)."""
        return self._ids

    @property
    def offsets(self) -> np.ndarray:
        return self._offsets


class IndexedDatasetWriter:
    """Streams sentences into ``{prefix}.ids.npy`` / ``{prefix}.offsets.npy``.

    Ids and offsets go to raw temp files as they arrive; :meth:`finalize` converts them to
    ``.npy`` (the length is only known at the end) and renames atomically. Use as a context
    manager: on an exception the temp files are removed and nothing final is written.
    """

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        self.prefix = str(prefix)
        Path(self.prefix).parent.mkdir(parents=True, exist_ok=True)
        # scratch files in the temporary-name scheme, so the stale-temp cleaner knows a killed run's
        self._ids_raw = temp_path(Path(self.prefix + ".ids.raw"))
        self._off_raw = temp_path(Path(self.prefix + ".offsets.raw"))
        self._ids_f = open(self._ids_raw, "wb")  # noqa: SIM115 - closed in finalize/abort
        self._off_f = open(self._off_raw, "wb")  # noqa: SIM115
        self._n_tokens = 0
        self._n_sent = 0
        self._off_f.write(np.zeros(1, dtype=np.int64).tobytes())
        self._done = False

    def add(self, ids: Sequence[int] | np.ndarray) -> None:
        arr = np.asarray(ids, dtype=np.int64)
        if arr.ndim != 1:
            raise ValueError("a sentence must be a 1-D sequence of ids")
        if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.int32).max):
            raise ValueError("token id out of int32 range")
        self._ids_f.write(arr.astype(np.int32).tobytes())
        self._n_tokens += int(arr.size)
        self._n_sent += 1
        self._off_f.write(np.int64(self._n_tokens).tobytes())

    def add_many(self, sentences: Iterable[Sequence[int]], batch: int = 4096) -> None:
        """Like :meth:`add` per sentence, one array write per ``batch`` sentences."""
        it = iter(sentences)
        while group := list(itertools.islice(it, batch)):
            lengths = np.fromiter((len(s) for s in group), dtype=np.int64, count=len(group))
            flat = np.fromiter(itertools.chain.from_iterable(group), dtype=np.int64, count=int(lengths.sum()))
            self.add_arrays(flat, lengths)

    def add_arrays(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Append ``len(lengths)`` sentences whose ids are concatenated in ``ids`` (binarize's hot loop:
        its workers send these two arrays per chunk)."""
        if ids.ndim != 1 or lengths.ndim != 1 or int(lengths.sum()) != ids.size or (lengths < 0).any():
            raise ValueError("ids must be the concatenation of sentences of the given lengths")
        if ids.size and (ids.min() < 0 or ids.max() > np.iinfo(np.int32).max):
            raise ValueError("token id out of int32 range")
        self._ids_f.write(ids.astype(np.int32, copy=False).tobytes())
        self._off_f.write((self._n_tokens + np.cumsum(lengths, dtype=np.int64)).tobytes())
        self._n_tokens += int(ids.size)
        self._n_sent += len(lengths)

    def __len__(self) -> int:
        return self._n_sent

    @property
    def num_tokens(self) -> int:
        return self._n_tokens

    @staticmethod
    def _raw_to_npy(raw: Path, final: str, dtype: type, length: int) -> None:
        # A .npy file is a header and the raw array bytes: write the header, then copy the bytes with
        # plain reads and writes (a memory map would count the whole file in the process' memory).
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": (length,),
        }
        with open(raw, "rb") as src, atomic_open(final, "wb") as out:
            np.lib.format.write_array_header_1_0(out, header)
            shutil.copyfileobj(src, out, _COPY_BYTES)

    def finalize(self) -> None:
        if self._done:
            return
        self._ids_f.close()
        self._off_f.close()
        try:
            self._raw_to_npy(self._ids_raw, self.prefix + IDS_SUFFIX, np.int32, self._n_tokens)
            self._raw_to_npy(self._off_raw, self.prefix + OFFSETS_SUFFIX, np.int64, self._n_sent + 1)
        finally:  # the scratch files go either way (a full disk must not keep them)
            for p in (self._ids_raw, self._off_raw):
                p.unlink(missing_ok=True)
        self._done = True

    def abort(self) -> None:
        if self._done:
            return
        self._ids_f.close()
        self._off_f.close()
        for p in (self._ids_raw, self._off_raw):
            p.unlink(missing_ok=True)
        self._done = True

    def __enter__(self) -> IndexedDatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finalize()
        else:
            self.abort()


def write_dataset(prefix: str | os.PathLike[str], sentences: Iterable[Sequence[int]]) -> int:
    """Convenience: write all ``sentences`` (streamed) to ``prefix``; returns the count."""
    with IndexedDatasetWriter(prefix) as w:
        w.add_many(sentences)
        return len(w)


def split_prefix(bin_dir: str | os.PathLike[str], split: str, lang: str) -> str:
    return os.path.join(str(bin_dir), f"{split}.{lang}")


class ParallelCorpus:
    """Source and target :class:`IndexedDataset` of one split of a binarized directory."""

    def __init__(self, bin_dir: str | os.PathLike[str], split: str, src_lang: str, tgt_lang: str) -> None:
        self.bin_dir = str(bin_dir)
        self.split, self.src_lang, self.tgt_lang = split, src_lang, tgt_lang
        self.src = IndexedDataset(split_prefix(bin_dir, split, src_lang))
        self.tgt = IndexedDataset(split_prefix(bin_dir, split, tgt_lang))
        verify_split_dir(bin_dir, split, (src_lang, tgt_lang))  # against binarize's meta.json
        if len(self.src) != len(self.tgt):
            raise InputError(
                f"{self.bin_dir}: split '{split}' has {len(self.src)} {src_lang} sentences "
                f"but {len(self.tgt)} {tgt_lang} sentences"
            )

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.src[i], self.tgt[i]

    @property
    def src_sizes(self) -> np.ndarray:
        return self.src.sizes

    @property
    def tgt_sizes(self) -> np.ndarray:
        return self.tgt.sizes
