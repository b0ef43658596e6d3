"""preprocess lists every pair it drops: ``{split}.dropped.tsv`` beside its output, named in meta.json.

The expected rows are derived by hand from the raw lines below and the thresholds the run is given
(``--min-len 2 --max-len 6 --hard-limit 8 --ratio 1.5 --dedup``, valid = every 5th line of train).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pipeline_lib.atomic import is_temp_file
from pipeline_lib.cli import main
from pipeline_lib.data.preprocess import DROPPED_TEXT_CHARS

LONG_WORD = "abcdefghij" * 30  # one token of 300 characters: cut in the list
# (line, source, target), 1-based line numbers of the raw files
RAW = [
    (1, "a b c", "x y z"),  # kept
    (2, "", "x y"),  # empty
    (3, "one", "un"),  # too_short (1 token < 2)
    (4, "a b c d e f g", "x y z w v u t"),  # too_long (7 > 6)
    (5, "p q", "r s t u"),  # valid (5th line): ratio 4/2 > 1.5
    (6, "a b c", "x y z"),  # duplicate of line 1
    (7, " ".join(["w"] * 9), "x"),  # over_hard_limit (9 raw tokens > 8), never tokenized
    (8, "k l m", "n o p"),  # kept
    (9, "k\tl m", "n o p q r"),  # ratio 5/2 (Moses strips the tab: "kl m"); listed as "k\\tl m"
    (10, "p q r", "s t u"),  # valid, kept
    (11, LONG_WORD, "x"),  # too_short, source cut
    (12, "d e f", "u v w"),  # kept
]
HEADER = "line\treason\tsource\ttarget"
EXPECTED_TRAIN = [
    HEADER,
    "2\tempty\t\tx y",
    "3\ttoo_short\tone\tun",
    "4\ttoo_long\ta b c d e f g\tx y z w v u t",
    "6\tduplicate\ta b c\tx y z",
    f"7\tover_hard_limit\t{' '.join(['w'] * 9)}\tx",
    "9\tratio\tk\\tl m\tn o p q r",
    f"11\ttoo_short\t{LONG_WORD[: DROPPED_TEXT_CHARS - 1]}…\tx",
]
EXPECTED_VALID = [HEADER, "5\tratio\tp q\tr s t u"]


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _preprocess(raw: Path, out: Path, *extra: str) -> int:
    args = ["preprocess", "--in-dir", str(raw), "--out-dir", str(out), "--src", "en", "--tgt", "fr"]
    thresholds = ["--min-len", "2", "--max-len", "6", "--hard-limit", "8", "--ratio", "1.5", "--dedup"]
    # Two workers and chunks of two lines: the list must come back in line order across chunks.
    return main([*args, *thresholds, "--workers", "2", "--chunk-size", "2", *extra])


def _corpus(raw: Path) -> None:
    _write(raw / "train.en", [src for _, src, _ in RAW])
    _write(raw / "train.fr", [tgt for _, _, tgt in RAW])
    _write(raw / "test.en", ["", "a b c d e f g h i j"])  # test is never cleaned: no list
    _write(raw / "test.fr", ["x", "y"])
    _write(raw / "mono.fr", ["u v w", "", "x y z"])


def test_dropped_pairs_listed_with_raw_line_and_reason(tmp_path: Path) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    _corpus(raw)
    assert _preprocess(raw, tok, "--valid-every", "5") == 0

    train = (tok / "train.dropped.tsv").read_text(encoding="utf-8").splitlines()
    assert train == EXPECTED_TRAIN
    assert (tok / "valid.dropped.tsv").read_text(encoding="utf-8").splitlines() == EXPECTED_VALID
    assert (tok / "mono.fr.dropped.tsv").read_text(encoding="utf-8").splitlines() == [
        "line\treason\ttext",
        "2\tempty\t",
    ]
    assert not (tok / "test.dropped.tsv").exists()

    meta = json.loads((tok / "meta.json").read_text())["splits"]
    assert meta["train"]["dropped_file"] == "train.dropped.tsv"
    assert meta["valid"]["dropped_file"] == "valid.dropped.tsv"
    assert meta["mono"]["dropped_file"] == "mono.fr.dropped.tsv"
    assert "dropped_file" not in meta["test"]
    # The list and the counts agree.
    for split in ("train", "valid"):
        rows = (tok / meta[split]["dropped_file"]).read_text(encoding="utf-8").splitlines()[1:]
        assert Counter(row.split("\t")[1] for row in rows) == meta[split]["removed"]
        assert len(rows) == meta[split]["input"] - meta[split]["kept"]


def test_a_failed_run_leaves_the_previous_list(tmp_path: Path) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    _corpus(raw)
    assert _preprocess(raw, tok, "--splits", "train") == 0
    before = (tok / "train.dropped.tsv").read_bytes()
    _write(raw / "train.en", ["one", "two"])  # every pair too short: the stage fails
    _write(raw / "train.fr", ["un", "deux"])
    assert _preprocess(raw, tok, "--splits", "train") == 2
    assert (tok / "train.dropped.tsv").read_bytes() == before
    assert not [p for p in tok.iterdir() if is_temp_file(p)]
