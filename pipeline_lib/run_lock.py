"""One process per run directory: an advisory ``flock`` on a lock file, with a record of the holder.

A stage that resumes in place (``train`` continues ``checkpoint_last.pt``; ``download`` appends to
its ``.part``) must not run twice on one directory: two trainers both resume from the same
checkpoint and overwrite each other's, which is what a SLURM requeue does while the old job still
runs on a node the controller lost.

Why ``flock`` and not a file that exists while a run holds it: the kernel drops the lock when the
holding process dies however it dies (SIGKILL, OOM, a node reboot), so a stale lock never blocks a
requeue and there is nothing to clean up. On NFS (v4, and v3 with lockd) Linux implements ``flock``
with the server's byte-range locks, which are tied to the client's lease: a node that dies or is cut
off loses them when the lease expires (the server's lease time, typically 90 s), so the requeued job
may be refused for that long and then proceeds. Lustre needs the ``flock`` mount option (``localflock``
locks only within one node). Where the file system refuses locks altogether, the run goes on with a
warning: refusing to train there would block every run, and the record below still names who ran.

The lock file holds one JSON line naming the holder (host, pid, SLURM job and restart count, start
time), rewritten by each holder, so the refusal can say who holds the directory.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from pipeline_lib.errors import PipelineError

LOCK_NAME = ".run.lock"
# errnos meaning "this file system does not do locks", not "someone holds it"
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


class RunDirBusy(PipelineError):
    """Another live process holds the run directory."""


def holder_record() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
        "slurm_restart": os.environ.get("SLURM_RESTART_COUNT"),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def describe(record: dict[str, Any] | None) -> str:
    if not record:
        return "a process that has not written its record yet"
    parts = [f"pid {record.get('pid')} on {record.get('host')}"]
    if record.get("slurm_job"):
        restart = record.get("slurm_restart")
        parts.append(f"SLURM job {record['slurm_job']}" + (f" (restart {restart})" if restart else ""))
    if record.get("since"):
        parts.append(f"since {record['since']}")
    return ", ".join(parts)


def _read_record(handle: IO[str]) -> dict[str, Any] | None:
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "null")
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _same_file(handle: IO[str], path: Path) -> bool:
    """Whether ``handle`` is still the file at ``path`` (a removing holder may have unlinked it)."""
    try:
        return os.fstat(handle.fileno()).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False


class RunDirLock:
    """Held from :meth:`acquire` until :meth:`release` or the process's end."""

    def __init__(self, path: Path, handle: IO[str] | None, remove: bool = False) -> None:
        self.path, self._handle, self._remove = path, handle, remove

    @classmethod
    def acquire(
        cls,
        directory: str | os.PathLike[str],
        what: str = "run directory",
        *,
        name: str = LOCK_NAME,
        wait: bool = False,
        remove_on_release: bool = False,
    ) -> RunDirLock:
        """Lock ``directory`` (through the lock file ``name`` in it); RunDirBusy (one line: the
        directory and the holder) if a live process holds it, or with ``wait`` block until it ends.
        ``remove_on_release`` deletes the lock file when done (a download leaves no trace)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        while True:
            # "a+": create without truncating, so a refused process does not erase the holder's record
            handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = describe(_read_record(handle))
                if not wait:
                    handle.close()
                    raise RunDirBusy(
                        f"{directory}: {what} in use by {holder}; not starting a second process on "
                        f"it (the lock is released when that process ends: {path})"
                    ) from None
                print(f"{directory}: waiting for {what}, held by {holder}", file=sys.stderr)
                fcntl.flock(handle, fcntl.LOCK_EX)
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    handle.close()
                    raise
                print(
                    f"warning: {path}: this file system does not support flock ({exc.strerror}); "
                    "nothing stops a second process on this directory",
                    file=sys.stderr,
                )
            if _same_file(handle, path):
                break
            handle.close()  # the holder removed the file we locked: lock the current one
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(holder_record()) + "\n")
        handle.flush()
        return cls(path, handle, remove_on_release)

    def release(self) -> None:
        if self._handle is not None:
            if self._remove:
                self.path.unlink(missing_ok=True)  # still holding it: no one locks a removed file
            self._handle.close()  # closing the descriptor drops the flock
            self._handle = None

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
