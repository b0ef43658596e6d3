"""Plain-text corpus I/O shared by the data stages.

Every file between stages is UTF-8, one sentence per line, named ``{split}.{lang}`` inside a
stage directory (``work/<dataset>/raw/train.en``, ``.../tok/train.en``, ``.../bpe/train.en``).
Readers decode strictly and report the first bad byte as ``file:line``; writers go through a
temporary file renamed into place, so a failed stage never clobbers a previous good output.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipeline_lib.atomic import atomic_open
from pipeline_lib.errors import InputError

SPLITS = ("train", "valid", "test")
BOM = "\ufeff"


def decode_line(path: Path, lineno: int, raw: bytes) -> str:
    """One raw line as text without its line ending; invalid UTF-8 or a NUL byte is an InputError
    naming the file, line and column."""
    nul = raw.find(b"\0")
    if nul >= 0:
        raise InputError(f"{path}:{lineno}: NUL byte at column {nul + 1} (not a text file?)")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}:{lineno}: invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None
    if lineno == 1 and line.startswith(BOM):
        line = line[1:]  # a byte-order mark is not content (chunk_map.scan_file counts it)
    # Only "\n" separates sentences; a stray "\r" (CRLF files) is not content.
    return line.rstrip("\n").rstrip("\r")


def decode_block(path: Path, first_lineno: int, block: bytes) -> list[str]:
    """The lines of ``block`` (the raw bytes of whole lines, the first of them line ``first_lineno``),
    exactly as :func:`read_lines` yields them. One decode for the whole block: a multi-byte UTF-8
    sequence never contains a newline byte, so the block decodes if and only if every line does. Only
    a bad block is decoded line by line, for :func:`decode_line`'s file:line:column error."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\0" in text:
        raws = block.split(b"\n")
        if block.endswith(b"\n"):
            raws.pop()
        return [decode_line(path, first_lineno + i, raw) for i, raw in enumerate(raws)]
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if "\r" in text:
        lines = [line.rstrip("\r") for line in lines]
    if first_lineno == 1 and lines and lines[0].startswith(BOM):
        lines[0] = lines[0][1:]
    return lines


def line_blocks(path: str | os.PathLike[str], lines_per_block: int) -> Iterator[tuple[int, bytes]]:
    """(number of the first line, raw bytes) of consecutive runs of ``lines_per_block`` whole lines.
    Cutting is all the reader does, so a chunk-parallel stage's main process stays out of the
    per-line work: its workers decode with :func:`decode_block`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    lineno = 1
    with path.open("rb") as f:
        while raws := list(itertools.islice(f, lines_per_block)):
            yield lineno, b"".join(raws)
            lineno += len(raws)


def read_lines(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield the lines of a UTF-8 file without their newline (see :func:`decode_line`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            yield decode_line(path, lineno, raw)


def count_lines(path: str | os.PathLike[str]) -> int:
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
        # A final line without newline still counts.
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                n += 1
    return n


def read_parallel(src: str | os.PathLike[str], tgt: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """Yield aligned (source, target) lines; a length mismatch is an error naming both files
    and the first line number that exists in only one of them."""
    it_s, it_t = read_lines(src), read_lines(tgt)
    lineno = 0
    while True:
        s = next(it_s, None)
        t = next(it_t, None)
        lineno += 1
        if s is None and t is None:
            return
        if s is None or t is None:
            longer, shorter = (tgt, src) if s is None else (src, tgt)
            raise InputError(
                f"{longer}:{lineno}: line-count mismatch, {shorter} ends after {lineno - 1} lines "
                f"but {longer} continues"
            )
        yield s, t


def write_lines(path: str | os.PathLike[str], lines: Iterable[str]) -> int:
    n = 0
    with atomic_open(path) as f:
        for line in lines:
            f.write(line)
            f.write("\n")
            n += 1
    return n
