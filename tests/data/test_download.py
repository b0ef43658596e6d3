"""The downloader against a real HTTP server on 127.0.0.1 that honours Range requests."""

from __future__ import annotations

import hashlib
import http.server
import io
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from pipeline_lib.data.download import DownloadError, extract, fetch


class RangeHandler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    log: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.log.append((self.path, self.headers.get("Range")))
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            body = body[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    RangeHandler.log = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in (
            ("corpus/train.en", "Hello world .\n" * 500),
            ("corpus/train.fr", "Bonjour .\n" * 500),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


TARBALL = _tarball()
SHA = hashlib.sha256(TARBALL).hexdigest()
RangeHandler.files = {"/data/corpus.tgz": TARBALL}


def test_full_download_and_extract(server, tmp_path: Path) -> None:
    dest = fetch(f"{server}/data/corpus.tgz", tmp_path / "corpus.tgz", sha256=SHA, size=len(TARBALL))
    assert dest.read_bytes() == TARBALL
    assert not (tmp_path / "corpus.tgz.part").exists()
    out = extract(dest, tmp_path / "ext")
    assert (out / "corpus" / "train.en").read_text().count("\n") == 500
    # A second call finds the verified file and sends no request.
    n = len(RangeHandler.log)
    fetch(f"{server}/data/corpus.tgz", tmp_path / "corpus.tgz", sha256=SHA)
    assert len(RangeHandler.log) == n


def test_resume_partial_download(server, tmp_path: Path) -> None:
    half = len(TARBALL) // 2
    (tmp_path / "corpus.tgz.part").write_bytes(TARBALL[:half])
    dest = fetch(f"{server}/data/corpus.tgz", tmp_path / "corpus.tgz", sha256=SHA)
    assert dest.read_bytes() == TARBALL
    assert RangeHandler.log == [("/data/corpus.tgz", f"bytes={half}-")]


def test_checksum_mismatch_refused_and_removed(server, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match=r"corpus\.tgz: sha256 mismatch"):
        fetch(f"{server}/data/corpus.tgz", tmp_path / "corpus.tgz", sha256="0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_404_names_url(server, tmp_path: Path) -> None:
    url = f"{server}/data/missing.tgz"
    with pytest.raises(DownloadError, match=rf"{url}: HTTP 404"):
        fetch(url, tmp_path / "missing.tgz", retries=3, sleep=lambda s: None)
    assert len(RangeHandler.log) == 1  # a 404 is not retried
    assert list(tmp_path.iterdir()) == []


def test_unreachable_retries_then_names_url(tmp_path: Path) -> None:
    waits: list[float] = []
    url = "http://127.0.0.1:9/nothing.tgz"  # discard port: connection refused
    with pytest.raises(DownloadError, match=rf"{url}: unreachable after 3 attempts"):
        fetch(url, tmp_path / "x.tgz", retries=2, backoff=0.5, sleep=waits.append)
    assert waits == [0.5, 1.0]


def test_cli_download_extract(server, tmp_path: Path) -> None:
    from pipeline_lib.cli import main

    rc = main(
        [
            "download",
            "--out-dir",
            str(tmp_path),
            "--url",
            f"{server}/data/corpus.tgz",
            "--sha256",
            SHA,
            "--extract",
        ]
    )
    assert rc == 0
    assert (tmp_path / "corpus" / "corpus" / "train.fr").is_file()
    assert '"sha256"' in (tmp_path / "manifest.json").read_text()


class SlowHandler(RangeHandler):
    """Sends the body in 20 pieces over ~1 s, so a second download starts while the first runs."""

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.log.append((self.path, self.headers.get("Range")))
        body = self.files[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        step = len(body) // 20 + 1
        for i in range(0, len(body), step):
            self.wfile.write(body[i : i + step])
            self.wfile.flush()
            time.sleep(0.05)


def test_two_processes_downloading_one_file_do_not_interleave(tmp_path: Path) -> None:
    body = bytes(range(256)) * 800
    SlowHandler.files = {"/big.bin": body}
    SlowHandler.log = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url, dest = f"http://127.0.0.1:{httpd.server_address[1]}/big.bin", tmp_path / "big.bin"
    code = (
        "import sys; from pipeline_lib.data.download import fetch; "
        "fetch(sys.argv[1], sys.argv[2], sha256=sys.argv[3], retries=0)"
    )
    sha = hashlib.sha256(body).hexdigest()
    try:
        procs = []
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", code, url, str(dest), sha], stderr=subprocess.PIPE, text=True
                )
            )
            time.sleep(0.3)
        results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [rc for rc, _ in results] == [0, 0], results
    assert dest.read_bytes() == body
    assert "waiting for the download of big.bin, held by pid" in results[1][1]
    assert len(SlowHandler.log) == 1  # the second took the first's verified file
