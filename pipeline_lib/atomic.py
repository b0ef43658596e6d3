"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every writer in the package goes through this module, with one temporary name: ``.<name>.tmp<pid>``
beside the target, renamed onto it on success and removed on failure. A writer killed mid-write
leaves that name behind, and :func:`remove_stale_temp_files` knows it. This is the only module that
renames files (tests/core/test_atomic.py keeps it so).

A stage cleans up after its own killed runs: the first time a process asks for the temporary name of
an output, the temporary files of that same output which were last written before this process
started are removed (:func:`temp_path`). They can only be a killed earlier run's: one output has one
writer at a time (Snakemake's lock per output; train's lock on its save dir), and a live writer's file
is newer than the process that would remove it. Temporary files of other outputs are left alone.

Files are created with ``open`` and so respect the umask (``mkstemp`` would make them 0600,
unreadable for colleagues on a shared filesystem).

A write that fails for lack of room or rights raises :class:`WriteError`: one line naming the
target, the cause and what was kept, which the CLI prints instead of a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pipeline_lib.errors import PipelineError

# The causes of a failed write that the user, not the code, has to fix.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS})
_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp\d+$")
# When this process began writing, near enough: the module is imported before any stage writes.
PROCESS_START = time.time()
_swept: set[Path] = set()  # outputs whose stale temporary files this process has removed


class WriteError(PipelineError):
    """A file could not be written (disk full, quota, permission, read-only filesystem)."""

    def __init__(self, path: Path, cause: OSError, kept: str) -> None:
        self.path, self.cause, self.kept = path, cause, kept
        code = errno.errorcode.get(cause.errno or 0, "")
        reason = f"{cause.strerror or cause} ({code})" if code else str(cause.strerror or cause)
        super().__init__(f"cannot write {path}: {reason}; kept: {kept}")

    def keeping(self, kept: str) -> WriteError:
        """The same failure with a more useful account of what was kept (the caller knows more)."""
        return WriteError(self.path, self.cause, kept)


def is_write_failure(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS


def temp_path(path: Path) -> Path:
    """This process's temporary name for ``path``; the first call for a ``path`` also removes the
    stale temporary files a killed earlier run left for it (see the module's docstring)."""
    if (key := path.absolute()) not in _swept:
        _swept.add(key)
        remove_stale_temp_files(path.parent, target=path.name, older_than=PROCESS_START)
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


def is_temp_file(path: Path) -> bool:
    """Whether ``path`` is a temporary file of this module's scheme."""
    return _TEMP_RE.match(path.name) is not None


def remove_stale_temp_files(
    folder: Path, target: str | None = None, older_than: float | None = None
) -> list[Path]:
    """Delete the temporary files killed writers left in ``folder`` (all, or only those of the file
    named ``target``; with ``older_than``, only those last modified before that time). Without
    ``older_than``, call it when no other process writes there (a stage's start)."""
    if not folder.is_dir():
        return []
    stale = [
        p for p in folder.iterdir()
        if (m := _TEMP_RE.match(p.name)) and (target is None or m["name"] == target) and p.is_file()
    ]  # fmt: skip
    if older_than is not None:
        stale = [p for p in stale if _mtime(p) < older_than]
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        print(f"removed {len(stale)} stale temporary file(s) from {folder}", file=sys.stderr)
    return stale


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # its writer finished (renamed it) meanwhile
        return float("inf")


def _previous(path: Path) -> str:
    return f"the previous {path.name}, unchanged" if path.exists() else f"nothing (no {path.name} yet)"


def _our_failure(exc: BaseException, tmp: Path) -> OSError | None:
    """The OSError of a failed write to ``tmp`` behind ``exc`` (a library may wrap it: torch.save
    raises RuntimeError when its writes fail), not of a read of some other file inside the block.
    A write on the open handle has no file name; open and rename name the temporary file."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain, not a cycle, but bounded all the same
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in WRITE_ERRNOS:
            ours = seen.filename is None or Path(seen.filename) in (tmp, *tmp.parents)
            return seen if ours else None
        seen = seen.__cause__ or seen.__context__
    return None


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", *, fsync: bool = False) -> Iterator[IO]:
    """Open a temporary file for writing and rename it onto ``path`` only if the block succeeds.
    ``fsync``: flush the data and the rename to disk (checkpoints, profiles)."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        kwargs = {"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {}
        handle = open(tmp, mode, **kwargs)  # noqa: SIM115 - closed below
        try:
            yield handle
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        finally:
            handle.close()
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if (failure := _our_failure(exc, tmp)) is not None:
            raise WriteError(path, failure, _previous(path)) from failure
        raise
    if fsync:
        fsync_dir(path.parent)


def write_text(path: str | os.PathLike[str], text: str, *, fsync: bool = False) -> None:
    with atomic_open(path, fsync=fsync) as handle:
        handle.write(text)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def write_json(
    path: str | os.PathLike[str], obj: Any, *, ensure_ascii: bool = False, fsync: bool = False
) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=ensure_ascii) + "\n", fsync=fsync)


def copy_file(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, fsync: bool = False) -> None:
    """Make ``dst`` a copy of ``src`` (a real copy, not a link: damage to one must spare the other)."""
    with open(src, "rb") as source, atomic_open(dst, "wb", fsync=fsync) as out:
        shutil.copyfileobj(source, out, 1 << 20)


def move(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename a finished file or folder onto ``dst`` (same filesystem: atomic)."""
    os.replace(src, dst)


class AtomicGroup:
    """Several outputs written as temporary files and renamed together at the end, so a stage that
    fails half-way leaves every previous output untouched."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []

    def tmp_for(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(path)
        self._pending.append((tmp, path))
        return tmp

    def adopt(self, src: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
        """Take a file written elsewhere (same filesystem) as the output ``path`` of the group."""
        move(src, self.tmp_for(path))

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
            return
        where = self._output_of(exc) if isinstance(exc, OSError) else None
        self.rollback()
        if where is not None and is_write_failure(exc):
            raise WriteError(where, exc, "the previous outputs, unchanged") from exc

    def _output_of(self, exc: OSError) -> Path | None:
        """The output whose temporary file failed, or their folder when the failing handle is unknown."""
        if exc.filename is not None:  # None: a write on an open handle
            return next((final for tmp, final in self._pending if exc.filename == str(tmp)), None)
        folders = [str(final.parent) for _, final in self._pending]
        return Path(os.path.commonpath(folders)) if folders else None
