"""Line blocks: the data stages' main process cuts files into raw blocks and the workers decode them.
The decoded lines must be exactly read_lines' (BOM, CRLF, a missing final newline), and a bad byte must
give read_lines' file:line:column error, whichever block and worker it lands in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.cli import main
from pipeline_lib.data.chunk_map import map_line_blocks, scan_file
from pipeline_lib.data.indexed import IndexedDatasetWriter
from pipeline_lib.data.textio import BOM, decode_block, decode_line, line_blocks, read_lines
from pipeline_lib.errors import InputError

CONTENTS = {
    "plain": b"one two\nthree\n\nfour five six\n",
    "no final newline": b"a b\nc d\ne",
    "bom and crlf": "\ufeffpremi\u00e8re ligne\r\nd\u00e9j\u00e0 vu\r\n\r\nfin\r\r\n".encode(),
    "a bom on line 2 is content": "x\n\ufeffy\n".encode(),
    "lone carriage returns": b"a\rb\nc\r\n\r",
    "multi-byte": "\u00e9l\u00e8ve \u2014 na\u00efve\n\U0001f600 \u4e2d\u6587\n\u00e7a\n".encode(),
}


def _lines(fn_input: list[str]) -> list[str]:
    return fn_input


@pytest.mark.parametrize("name", CONTENTS)
@pytest.mark.parametrize("per_block", [1, 2, 3, 1000])
def test_blocks_decode_to_exactly_the_lines_read_lines_yields(tmp_path: Path, name: str, per_block: int):
    path = tmp_path / "f.txt"
    path.write_bytes(CONTENTS[name])
    decoded = [
        line for lineno, block in line_blocks(path, per_block) for line in decode_block(path, lineno, block)
    ]
    assert decoded == list(read_lines(path))
    starts = [lineno for lineno, _ in line_blocks(path, per_block)]
    assert starts == list(range(1, len(decoded) + 1, per_block))


def _scan_line_by_line(path: Path) -> tuple[int, int, bool]:
    """What preprocess counted before scan_file: one raw line at a time, in one process."""
    lines = crlf = 0
    bom = False
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            decode_line(path, lineno, raw)
            bom = bom or (lineno == 1 and raw.startswith(BOM.encode("utf-8")))
            lines += 1
            crlf += raw.endswith(b"\r\n") or raw.endswith(b"\r")
    return lines, crlf, bom


@pytest.mark.parametrize("name", CONTENTS)
@pytest.mark.parametrize("workers", [1, 2])
def test_scan_file_counts_what_a_line_by_line_scan_counts(tmp_path: Path, name: str, workers: int):
    path = tmp_path / "f.txt"
    path.write_bytes(CONTENTS[name])
    for per_block in (1, 2, 1000):
        assert scan_file(path, workers, chunk_size=per_block) == _scan_line_by_line(path)


BAD = {
    "invalid UTF-8": "ok\n\u00e9t\u00e9\nfine\n".encode() + b"bad \xe8 here\nlast\n",
    "NUL byte": "ok\n\u00e9t\u00e9\nfine\nbad \0 here\nlast\n".encode(),
    "truncated sequence at the end": "ok\n\u00e9t\u00e9\nfine\nends in ".encode() + "\u00e9".encode()[:1],
}


def _expected_error(path: Path) -> str:
    with pytest.raises(InputError) as exc:
        list(read_lines(path))
    return str(exc.value)


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_byte_gives_read_lines_error_from_any_block_and_worker(tmp_path: Path, name: str, workers: int):
    path = tmp_path / "bad.txt"
    path.write_bytes(BAD[name])
    expected = _expected_error(path)
    assert ":4: " in expected  # the bad line is line 4 in each case
    for per_block in (1, 2, 3, 100):
        with pytest.raises(InputError) as exc:
            list(map_line_blocks(_lines, path, workers=workers, chunk_size=per_block))
        assert str(exc.value) == expected
        with pytest.raises(InputError) as exc:
            scan_file(path, workers, chunk_size=per_block)
        assert str(exc.value) == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_back_in_file_order(tmp_path: Path, workers: int):
    path = tmp_path / "n.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)), encoding="utf-8")
    out = list(map_line_blocks(_lines, path, workers=workers, chunk_size=7))
    assert [len(chunk) for chunk in out] == [7] * 142 + [6]
    assert [line for chunk in out for line in chunk] == [f"line {i}" for i in range(1000)]


def test_add_arrays_writes_the_same_files_as_add(tmp_path: Path):
    rng = np.random.default_rng(0)
    sentences = [rng.integers(0, 5000, size=int(n)).tolist() for n in rng.integers(0, 40, size=300)]
    with IndexedDatasetWriter(tmp_path / "one") as w:
        for s in sentences:
            w.add(s)
    with IndexedDatasetWriter(tmp_path / "arrays") as w:
        for i in range(0, 300, 11):
            group = sentences[i : i + 11]
            flat = np.array([t for s in group for t in s], dtype=np.int32)
            w.add_arrays(flat, np.array([len(s) for s in group], dtype=np.int64))
    for suffix in (".ids.npy", ".offsets.npy"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"arrays{suffix}").read_bytes()
    with pytest.raises(ValueError, match="concatenation"), IndexedDatasetWriter(tmp_path / "bad") as w:
        w.add_arrays(np.array([1, 2, 3], dtype=np.int32), np.array([1, 1], dtype=np.int64))


def _corpus(root: Path, bad_fr_line: int | None = None) -> Path:
    """train.{en,fr} of 12 lines; line ``bad_fr_line`` of train.fr has a Latin-1 byte."""
    root.mkdir(parents=True, exist_ok=True)
    en = [f"the cat number {i} sat on the mat" for i in range(12)]
    fr = [f"le chat num\u00e9ro {i} est sur le tapis" for i in range(12)]
    (root / "train.en").write_text("".join(f"{s}\n" for s in en), encoding="utf-8")
    data = [s.encode() for s in fr]
    if bad_fr_line is not None:
        data[bad_fr_line - 1] = fr[bad_fr_line - 1].encode("latin-1")
    (root / "train.fr").write_bytes(b"".join(d + b"\n" for d in data))
    return root


def _binarize(in_dir: Path, out_dir: Path) -> int:
    return main(["binarize", "--in-dir", str(in_dir), "--out-dir", str(out_dir), "--src", "en", "--tgt", "fr",
                 "--splits", "train", "--workers", "2", "--chunk-size", "4"])  # fmt: skip


def test_binarize_names_the_bad_line_and_keeps_the_previous_output(tmp_path: Path, capsys):
    out = tmp_path / "bin"
    assert _binarize(_corpus(tmp_path / "good"), out) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    bad = _corpus(tmp_path / "bad", bad_fr_line=10)
    assert _binarize(bad, out) == 2
    assert f"{bad / 'train.fr'}:10: invalid UTF-8 (byte 0xe9 at column 12)" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_apply_bpe_names_the_bad_line(tmp_path: Path, capsys):
    good = _corpus(tmp_path / "tok")
    argv = ["--src", "en", "--tgt", "fr", "--workers", "2"]
    assert (
        main(
            ["learn-bpe", "--in-dir", str(good), "--model-dir", str(tmp_path / "sw"), "--merges", "20", *argv]
        )
        == 0
    )
    bad = _corpus(tmp_path / "bad", bad_fr_line=7)
    apply = ["apply-bpe", "--in-dir", str(bad), "--model-dir", str(tmp_path / "sw"), "--out-dir", str(tmp_path / "bpe"),
             "--splits", "train", "--chunk-size", "3", *argv]  # fmt: skip
    assert main(apply) == 2
    assert f"{bad / 'train.fr'}:7: invalid UTF-8 (byte 0xe9 at column 12)" in capsys.readouterr().err
    assert not (tmp_path / "bpe" / "train.fr").exists()
