"""Bad input at the preprocess entry, through the real CLI: a named error (rc 2, no traceback) and no
output left behind, or a success whose changes are counted in meta.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PAIRS = [("Hello world .", "Bonjour le monde ."), ("A small test .", "Un petit essai ."), ("Yes .", "Oui .")]


def write_corpus(raw: Path, *, src: bytes | None = None, tgt: bytes | None = None) -> None:
    raw.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        (raw / f"{split}.en").write_bytes(
            src if src is not None else "".join(f"{s}\n" for s, _ in PAIRS).encode()
        )
        (raw / f"{split}.fr").write_bytes(
            tgt if tgt is not None else "".join(f"{t}\n" for _, t in PAIRS).encode()
        )


def preprocess(raw: Path, out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pipeline_lib", "preprocess", "--in-dir", str(raw), "--out-dir", str(out),
           "--src", "en", "--tgt", "fr", "--workers", "1"]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_nul_byte_is_an_error_naming_file_and_line(tmp_path: Path):
    raw, out = tmp_path / "raw", tmp_path / "tok"
    write_corpus(raw, src=b"Hello world .\nA sm\x00all test .\nYes .\n")
    proc = preprocess(raw, out)
    assert proc.returncode == 2, proc.stderr
    assert "train.en:2: NUL byte at column 5" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_crlf_is_normalized_and_counted(tmp_path: Path):
    raw, out = tmp_path / "raw", tmp_path / "tok"
    write_corpus(raw, tgt="".join(f"{t}\r\n" for _, t in PAIRS).encode())
    proc = preprocess(raw, out)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["splits"]["train"]["crlf_normalized"] == 3
    assert "\r" not in (out / "train.fr").read_text() and "\r" not in (out / "test.ref.fr").read_text()


def test_empty_input_leaves_no_output_directory(tmp_path: Path):
    raw, out = tmp_path / "raw", tmp_path / "tok"
    write_corpus(raw, src=b"", tgt=b"")
    proc = preprocess(raw, out)
    assert proc.returncode == 2 and "is empty after cleaning" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists(), "an empty tok/ directory would pass for preprocess output"
