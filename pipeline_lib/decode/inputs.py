"""What the translate stage reads: the data directory a checkpoint was trained on, and sources.

Sources are either subword text (one sentence per line, already BPE'd/SentencePiece'd, as for
``fairseq-interactive``) or a split of a binarized directory (as for ``fairseq-generate``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.data.indexed import IndexedDataset, dataset_exists, split_prefix
from pipeline_lib.data.integrity import load_meta, verify_split
from pipeline_lib.data.textio import count_lines, decode_line, read_lines
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.errors import CheckpointError, ConfigError, InputError


@dataclass
class DataInfo:
    """The binarized directory's vocabulary and metadata (what to undo on the output)."""

    bin_dir: Path
    vocab: Vocabulary
    meta: dict[str, Any]


@dataclass
class Sources:
    ids: list[list[int]]  # without </s>
    text: list[str]  # the subword source lines (for S- lines)
    references: list[str] | None  # subword target lines, when a binarized split has them
    unk_tokens: int
    tokens: int
    origin: str  # file or split name, for messages


def resolve_data(checkpoint_meta: dict[str, Any], data_dir: str | None, checkpoint: str) -> DataInfo:
    data = checkpoint_meta.get("data") or {}
    bin_dir = data_dir if data_dir is not None else data.get("bin_dir")
    if not bin_dir:
        raise ConfigError(f"--data-dir is needed: checkpoint {checkpoint} does not record its data directory")
    bin_dir = Path(bin_dir)
    if not (bin_dir / "vocab.txt").is_file():
        hint = "" if data_dir is not None else f" (recorded in checkpoint {checkpoint}; pass --data-dir)"
        raise ConfigError(f"{bin_dir / 'vocab.txt'}: vocabulary not found{hint}")
    vocab = Vocabulary.load(bin_dir / "vocab.txt")
    expected = checkpoint_meta.get("vocab_sha256")
    if expected and vocab.sha256() != expected:
        raise CheckpointError(
            f"{bin_dir / 'vocab.txt'} (sha256 {vocab.sha256()[:12]}…) is not the vocabulary checkpoint "
            f"{checkpoint} was trained with (sha256 {expected[:12]}…)"
        )
    return DataInfo(bin_dir, vocab, load_meta(bin_dir))


def _check_length(n: int, max_positions: int, where: str) -> None:
    if n + 1 > max_positions:
        raise InputError(f"{where}: source has {n} tokens + </s>; the model accepts at most {max_positions}")


def read_text_sources(path: str, vocab: Vocabulary, max_positions: int) -> Sources:
    """Subword text, one sentence per line; ``-`` reads stdin. Every line is validated first."""
    if path == "-":
        # The same strict decoding as files: NUL or invalid UTF-8 names the line.
        stdin = Path("<stdin>")
        lines = [decode_line(stdin, n, raw) for n, raw in enumerate(sys.stdin.buffer, 1)]
    else:
        if not os.path.isfile(path):
            raise InputError(f"{path}: input file not found")
        lines = list(read_lines(path))
    return encode_lines(lines, vocab, max_positions, path)


def read_raw_lines(path: str) -> list[str]:
    """Untokenized text, one sentence per line (``-``: stdin), strictly decoded."""
    if path == "-":
        stdin = Path("<stdin>")
        return [decode_line(stdin, n, raw) for n, raw in enumerate(sys.stdin.buffer, 1)]
    if not os.path.isfile(path):
        raise InputError(f"{path}: input file not found")
    return list(read_lines(path))


def encode_lines(lines: list[str], vocab: Vocabulary, max_positions: int, origin: str) -> Sources:
    """Subword lines as ids; a line too long for the model names its line number."""
    ids: list[list[int]] = []
    unk = total = 0
    for lineno, line in enumerate(lines, 1):
        seq = vocab.encode(line.split())
        _check_length(len(seq), max_positions, f"{origin}:{lineno}")
        unk += seq.count(vocab.unk)
        total += len(seq)
        ids.append(seq)
    return Sources(ids, lines, None, unk, total, origin)


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (0 <= K < N): the K-th of N contiguous, near-equal parts of the input."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N, e.g. 0/4; got {text!r}") from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError(f"{text}: need 0 <= K < N")
    return k, n


def shard_range(lines: int, shard: tuple[int, int] | None) -> tuple[int, int]:
    """[start, stop) line indices of a shard: N contiguous parts whose sizes differ by at most one."""
    if shard is None:
        return 0, lines
    k, n = shard
    return k * lines // n, (k + 1) * lines // n


def _lines_in_range(path: str, start: int, stop: int) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of lines [start, stop) of ``path``, strictly decoded."""
    for lineno, line in enumerate(read_lines(path), 1):
        if lineno > stop:
            return
        if lineno > start:
            yield lineno, line


def iter_text_sources(
    path: str,
    vocab: Vocabulary,
    max_positions: int,
    shard: tuple[int, int] | None,
    chunk_lines: int,
) -> tuple[int, Iterator[tuple[int, Sources]]]:
    """(sentences in the shard, chunks of at most ``chunk_lines`` as (first id, Sources)).

    Every line of the shard is validated before the first chunk is yielded (bad input fails before
    any decoding), then the file is read again chunk by chunk, so memory does not grow with the input.
    Ids count from the start of the shard.
    """
    if not os.path.isfile(path):
        raise InputError(f"{path}: input file not found")
    start, stop = shard_range(count_lines(path), shard)
    for lineno, line in _lines_in_range(path, start, stop):
        _check_length(len(line.split()), max_positions, f"{path}:{lineno}")

    def chunks() -> Iterator[tuple[int, Sources]]:
        buffer: list[str] = []
        first = 0
        for lineno, line in _lines_in_range(path, start, stop):
            buffer.append(line)
            if len(buffer) == chunk_lines or lineno == stop:
                yield first, _encode(buffer, vocab, f"{path}:{start + first + 1}-{lineno}")
                first += len(buffer)
                buffer = []

    return stop - start, chunks()


def _encode(lines: list[str], vocab: Vocabulary, origin: str) -> Sources:
    ids = [vocab.encode(line.split()) for line in lines]
    unk = sum(seq.count(vocab.unk) for seq in ids)
    return Sources(ids, lines, None, unk, sum(len(seq) for seq in ids), origin)


def read_binarized_sources(
    info: DataInfo, split: str, src_lang: str, tgt_lang: str | None, max_positions: int
) -> Sources:
    prefix = split_prefix(info.bin_dir, split, src_lang)
    data = IndexedDataset(prefix)
    verify_split(info.bin_dir, split, src_lang, info.meta)
    vocab = info.vocab
    ids: list[list[int]] = []
    unk = total = 0
    for i in range(len(data)):
        seq = data[i].tolist()
        _check_length(len(seq), max_positions, f"{prefix} sentence {i + 1}")
        unk += seq.count(vocab.unk)
        total += len(seq)
        ids.append(seq)
    refs = None
    if tgt_lang and dataset_exists(split_prefix(info.bin_dir, split, tgt_lang)):
        tgt = IndexedDataset(split_prefix(info.bin_dir, split, tgt_lang))
        verify_split(info.bin_dir, split, tgt_lang, info.meta)
        if len(tgt) != len(data):
            raise InputError(
                f"{info.bin_dir}: split {split} has {len(data)} {src_lang} but {len(tgt)} {tgt_lang} lines"
            )
        refs = [vocab.string(tgt[i]) for i in range(len(tgt))]
    return Sources(ids, [vocab.string(s) for s in ids], refs, unk, total, f"{prefix}.*")


def split_size(bin_dir: str | os.PathLike[str], split: str) -> int:
    """Sentences of a binarized split, from binarize's meta.json (for a diverged run's placeholders)."""
    meta = load_meta(Path(bin_dir))
    stats = meta.get("splits", {}).get(split)
    if stats is None:
        raise InputError(f"{Path(bin_dir) / 'meta.json'}: no split {split!r}")
    return int(stats.get("pairs", stats.get("sentences", 0)))
