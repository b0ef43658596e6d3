"""HTTP(S) download with resume, checksums, retries, and archive extraction.

:func:`fetch` streams a URL to ``{dest}.part``; if a ``.part`` is already there it asks for the
rest with an HTTP ``Range`` header (a server answering 200 instead of 206 restarts the file).
Transient failures (connection errors, timeouts, 5xx, 429) are retried with exponential
backoff, resuming each time; 4xx answers fail at once. When the transfer completes, the size
and sha256 (if given) are checked: a mismatch deletes the partial file and raises, and only
a verified file is renamed onto ``dest``. Every error names the URL.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import shutil
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from pipeline_lib.atomic import atomic_open, move
from pipeline_lib.errors import InputError
from pipeline_lib.run_lock import RunDirLock

log = logging.getLogger(__name__)
_BLOCK = 1 << 16
_USER_AGENT = "deepnmt-repro/0.1 (+https://github.com/)"


class DownloadError(InputError):
    """A source could not be fetched or failed verification; the message names the URL."""


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    return file_digest(path, "sha256")


def _transfer(url: str, part: Path, timeout: float) -> None:
    """One attempt: append the missing bytes of ``url`` to ``part``."""
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the range starts at the end: the .part is already complete
            return
        raise
    with resp:
        status = resp.status
        mode = "ab"
        if have and status == 206:
            m = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != have:
                got = resp.headers.get("Content-Range")
                raise DownloadError(f"{url}: server resumed at the wrong offset ({got}, have {have} bytes)")
            log.info("resuming %s at byte %d", url, have)
        elif have:
            log.info("%s: server ignored the Range request, restarting", url)
            mode, have = "wb", 0
        length = resp.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        desc = url.rsplit("/", 1)[-1]
        with (
            open(part, mode) as f,
            tqdm(total=total, initial=have, unit="B", unit_scale=True, desc=desc, disable=None) as bar,
        ):
            for block in iter(lambda: resp.read(_BLOCK), b""):
                f.write(block)
                bar.update(len(block))
        if total is not None and part.stat().st_size < total:
            raise ConnectionError(f"connection closed after {part.stat().st_size} of {total} bytes")


def fetch(
    url: str,
    dest: str | os.PathLike[str],
    *,
    sha256: str | None = None,
    size: int | None = None,
    retries: int = 5,
    backoff: float = 2.0,
    timeout: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.part``), verify it, rename it into place.

    An existing ``dest`` whose checksum/size match is kept without any request.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() and _verified(dest, sha256, size):
        log.info("%s: already present and verified", dest)
        return dest
    # Another process resuming the same .part would interleave its bytes with ours: wait for it, then
    # take its finished file (pipeline_lib/run_lock.py; a dead holder's lock is gone with it).
    with RunDirLock.acquire(
        dest.parent,
        f"the download of {dest.name}",
        name=f".{dest.name}.lock",
        wait=True,
        remove_on_release=True,
    ):
        if dest.exists() and _verified(dest, sha256, size):
            log.info("%s: downloaded meanwhile by another process, verified", dest)
            return dest
        return _fetch_locked(url, dest, sha256, size, retries, backoff, timeout, sleep)


def _fetch_locked(
    url: str,
    dest: Path,
    sha256: str | None,
    size: int | None,
    retries: int,
    backoff: float,
    timeout: float,
    sleep: Callable[[float], None],
) -> Path:
    part = dest.with_name(dest.name + ".part")
    for attempt in range(retries + 1):
        try:
            _transfer(url, part, timeout)
            break
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code != 429:
                raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}") from None
            err: Exception = exc
        except DownloadError:
            part.unlink(missing_ok=True)
            raise
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            err = exc
        if attempt == retries:
            raise DownloadError(f"{url}: unreachable after {retries + 1} attempts ({err})")
        wait = backoff * 2**attempt
        log.warning("%s: %s; retrying in %.0fs (%d/%d)", url, err, wait, attempt + 1, retries)
        sleep(wait)
    got_size = part.stat().st_size
    if size is not None and got_size != size:
        part.unlink()
        raise DownloadError(f"{url}: size mismatch, expected {size} bytes, got {got_size}; file removed")
    if sha256 is not None:
        digest = sha256_file(part)
        if digest != sha256.lower():
            part.unlink()
            raise DownloadError(
                f"{url}: sha256 mismatch, expected {sha256.lower()}, got {digest}; file removed"
            )
    move(part, dest)  # the .part file is kept between runs on purpose: the next one resumes it
    return dest


def _verified(path: Path, sha256: str | None, size: int | None) -> bool:
    if size is not None and path.stat().st_size != size:
        return False
    return sha256 is None or sha256_file(path) == sha256.lower()


# -- extraction ---------------------------------------------------------------------------------
def extract(archive: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Extract a .tgz/.tar.gz/.tar/.gz (or convert a .sgm) into ``out_dir``, atomically.

    Returns the directory (archives) or file (.gz, .sgm) produced.
    """
    archive, out_dir = Path(archive), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = archive.name
    if name.endswith((".tgz", ".tar.gz", ".tar")):
        stem = re.sub(r"(\.tgz|\.tar\.gz|\.tar)$", "", name)
        final = out_dir / stem
        tmp = out_dir / (stem + ".extracting")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")  # "data" refuses absolute paths and ../ escapes
        except (tarfile.TarError, OSError, EOFError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise InputError(f"{archive}: cannot extract ({exc})") from exc
        shutil.rmtree(final, ignore_errors=True)
        move(tmp, final)
        return final
    if name.endswith(".gz"):
        final = out_dir / name[:-3]
        try:
            with gzip.open(archive, "rb") as src, atomic_open(final, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (OSError, EOFError) as exc:
            raise InputError(f"{archive}: cannot gunzip ({exc})") from exc
        return final
    if name.endswith(".sgm"):
        final = out_dir / name[:-4]
        sgm_to_text(archive, final)
        return final
    raise InputError(f"{archive}: unknown archive type (expected .tgz, .tar.gz, .tar, .gz or .sgm)")


_SEG = re.compile(r"<seg[^>]*>\s*(.*?)\s*</seg>", re.IGNORECASE)


def sgm_to_text(sgm: str | os.PathLike[str], out: str | os.PathLike[str]) -> int:
    """One line per ``<seg>`` of a WMT SGML file (as fairseq's prepare scripts grep/sed it,
    including turning the typographic apostrophe into ``'``)."""
    from pipeline_lib.data.textio import read_lines, write_lines

    segs = []
    for line in read_lines(sgm):
        m = _SEG.search(line)
        if m:
            segs.append(m.group(1).replace("\u2019", "'"))
    if not segs:
        raise InputError(f"{sgm}: no <seg> elements found")
    return write_lines(out, segs)
