"""Reading parallel evaluation files strictly and writing results atomically.

Evaluation inputs are plain UTF-8 text, one segment per line. A misaligned or
corrupt file must fail loudly (naming the file and line) rather than silently
produce a score for the wrong pairs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from pipeline_lib.errors import InputError


def read_segments(path: str | os.PathLike, *, allow_empty: bool = True) -> list[str]:
    """Read one segment per line, like ``sacrebleu`` does (``\\n`` separated, trailing whitespace
    stripped).

    Lines are split on ``\\n`` only (not on U+2028 or a lone ``\\r``) so the line numbers agree with
    ``wc -l`` and with the sacrebleu CLI. Invalid UTF-8 raises :class:`InputError` with the 1-based
    line number, and so does a NUL byte (a binary or corrupt file, never text). ``allow_empty=False``
    rejects empty lines and an empty file (used for references: an empty reference is almost always a
    misalignment, and nothing can be scored against no segments).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    raw_lines = data.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the final newline terminates the last line, it does not start a new one
    segments: list[str] = []
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError(
            f"{path}:1: starts with a UTF-8 byte-order mark (not part of any segment); remove it"
        )
    if not allow_empty and not raw_lines:
        raise InputError(f"{path}: empty file, no segments to score against")
    for lineno, raw in enumerate(raw_lines, start=1):
        nul = raw.find(b"\0")
        if nul >= 0:
            raise InputError(f"{path}:{lineno}: NUL byte at column {nul + 1} (not a text file?)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{path}:{lineno}: invalid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
            ) from exc
        text = text.rstrip()
        if not allow_empty and not text:
            raise InputError(f"{path}:{lineno}: empty line")
        segments.append(text)
    return segments


def iter_segments(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, text)`` from a possibly large file (a training corpus), strict UTF-8."""
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}:{lineno}: invalid UTF-8 (byte 0x{raw[exc.start]:02x})") from exc
            yield lineno, text.rstrip()


def check_same_length(
    path_a: str | os.PathLike, lines_a: Sequence[str], path_b: str | os.PathLike, lines_b: Sequence[str]
) -> None:
    """Raise :class:`InputError` naming both files and the first line that has no partner."""
    if len(lines_a) != len(lines_b):
        shorter, longer = (path_a, path_b) if len(lines_a) < len(lines_b) else (path_b, path_a)
        first_unpaired = min(len(lines_a), len(lines_b)) + 1
        raise InputError(
            f"{path_a} has {len(lines_a)} lines but {path_b} has {len(lines_b)}: "
            f"{longer}:{first_unpaired} has no partner line in {shorter}"
        )
