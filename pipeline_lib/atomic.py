"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every writer goes through a temporary file beside the target (``.<name>.tmp<pid>``) that is renamed
onto it on success and removed on failure. Files are created with ``open`` and so respect the umask
(``mkstemp`` would make them 0600, unreadable for colleagues on a shared filesystem).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO]:
    """Open a temporary file for writing and rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    kwargs = {"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {}
    handle = open(tmp, mode, **kwargs)  # noqa: SIM115 - closed below
    try:
        yield handle
    except BaseException:
        handle.close()
        tmp.unlink(missing_ok=True)
        raise
    handle.close()
    os.replace(tmp, path)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as handle:
        handle.write(text)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def write_json(path: str | os.PathLike[str], obj: Any, *, ensure_ascii: bool = False) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=ensure_ascii) + "\n")


class AtomicGroup:
    """Several outputs written as temporary files and renamed together at the end, so a stage that
    fails half-way leaves every previous output untouched."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []

    def tmp_for(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        self._pending.append((tmp, path))
        return tmp

    def commit(self) -> None:
        for tmp, final in self._pending:
            os.replace(tmp, final)
        self._pending.clear()

    def rollback(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending.clear()

    def __enter__(self) -> AtomicGroup:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()
