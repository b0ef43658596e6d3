"""A miniature statmt.org: every archive the paper recipes download, with the real inner layout (the
same folders and file names as in the real tgz/tar/gz files, WMT sgm test sets), a few thousand lines
each, served by a real HTTP server from a directory laid out like the original hosts' URL paths.

The text is tests/fixtures/workflow_tiny (real Bible verses, English x French), repeated to reach a
size where fairseq's ``valid = every 1333rd pair`` leaves a few valid pairs. The En-De archives reuse
the French side under the German file names: the pipeline only sees file names and text.
``SHA256SUMS`` pins the mirror's own bytes (``download: {checksums: ...}``).
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from pipeline_lib.data.recipes import MONO_RECIPES, url_path

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "workflow_tiny"
REPEAT = 7  # 400 pairs x 7 = 2,800 training pairs: valid_every 1333 keeps 2 of them
# Characters that Moses normalize-punctuation would rewrite; the tokenized references must keep them.
TEST_LINES = 12
QUOTED_TEST_LINE = 3  # 0-based line of test.fr that gets « » and a typographic apostrophe


def _lines(name: str) -> list[str]:
    return (TINY / name).read_text(encoding="utf-8").splitlines()


def _train_pairs() -> list[tuple[str, str]]:
    pairs = list(zip(_lines("train.en"), _lines("train.fr"), strict=True)) * REPEAT
    # The 1333rd and 2666th pairs become the En-Fr valid set: keep them short and clean.
    for k in (1333, 2666):
        pairs[k - 1] = ("The king spoke to the people.", "Le roi parla au peuple.")
    return pairs


def eval_pairs() -> list[tuple[str, str]]:
    en, fr = _lines("test.en")[:TEST_LINES], _lines("test.fr")[:TEST_LINES]
    fr[QUOTED_TEST_LINE] = "« C’est la parole de l’Éternel », dit-il."
    return list(zip(en, fr, strict=True))


def _text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _tar(members: dict[str, bytes], gz: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1_400_000_000
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _sgm(kind: str, lang: str, lines: list[str]) -> bytes:
    tag = "srcset" if kind == "src" else "refset"
    out = [
        f'<{tag} setid="newstest" srclang="any" trglang="{lang}">',
        '<doc sysid="ref" docid="d1" genre="news" origlang="en">',
    ]
    out += [f'<seg id="{i}">{line}</seg>' for i, line in enumerate(lines, 1)]
    out += ["</doc>", f"</{tag}>"]
    return _text(out)


def _parallel(stem: str, pairs: list[tuple[str, str]], tgt: str) -> dict[str, bytes]:
    return {f"{stem}.en": _text([p[0] for p in pairs]), f"{stem}.{tgt}": _text([p[1] for p in pairs])}


IWSLT_TEST = (
    "IWSLT14.TED.dev2010.de-en",
    "IWSLT14.TEDX.dev2012.de-en",
    "IWSLT14.TED.tst2010.de-en",
    "IWSLT14.TED.tst2011.de-en",
    "IWSLT14.TED.tst2012.de-en",
)
IWSLT_TRAIN_TALKS = 40  # x 10 sentences (+ title and description) each


def _train_tags(sentences: list[str], lang: str) -> bytes:
    """A train.tags file: talk metadata lines around the sentences, as in the IWSLT archive."""
    out = []
    per_talk = 10
    for talk in range(len(sentences) // per_talk):
        out += [
            f"<url>http://www.ted.com/talks/talk_{talk}.html</url>",
            f"<keywords>talks, {lang}</keywords>",
            f"<talkid>{talk}</talkid>",
            f"<title>Talk {talk} ({lang})</title>",
            f"<description>About talk {talk} ({lang}).</description>",
        ]
        out += sentences[talk * per_talk : (talk + 1) * per_talk]
    return _text(out)


def _ted_xml(stem: str, lang: str, lines: list[str]) -> bytes:
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<mteval>", f'<srcset setid="{stem}" srclang="{lang}">',
           '<doc docid="1" genre="lectures">', "<talkid>1</talkid>", "<title>A talk</title>"]  # fmt: skip
    out += [f'<seg id="{i}"> {line} </seg>' for i, line in enumerate(lines, 1)]
    out += ["</doc>", "</srcset>", "</mteval>"]
    return _text(out)


def iwslt_members() -> dict[str, bytes]:
    """de-en.tgz: the French side stands in for German, as for the WMT En-De archives."""
    en, de = _lines("train.en"), _lines("train.fr")
    n = IWSLT_TRAIN_TALKS * 10
    members = {
        "de-en/train.tags.de-en.de": _train_tags((de * 2)[:n], "de"),
        "de-en/train.tags.de-en.en": _train_tags((en * 2)[:n], "en"),
    }
    test = eval_pairs()
    for k, stem in enumerate(IWSLT_TEST):
        part = test[k * 2 : k * 2 + 2]
        members[f"de-en/{stem}.de.xml"] = _ted_xml(stem, "de", [p[1] for p in part])
        members[f"de-en/{stem}.en.xml"] = _ted_xml(stem, "en", [p[0] for p in part])
    return members


def build(root: Path) -> Path:
    """Write the mirror under ``root`` (paths as on the original hosts) and its SHA256SUMS."""
    train = _train_pairs()
    n = len(train)
    fr = [
        train[: n // 5],
        train[n // 5 : 2 * n // 5],
        train[2 * n // 5 : 3 * n // 5],
        train[3 * n // 5 : 4 * n // 5],
        train[4 * n // 5 :],
    ]
    de = [train[: n // 3], train[n // 3 : 2 * n // 3], train[2 * n // 3 :]]
    files: dict[str, bytes] = {
        "wmt13/training-parallel-europarl-v7.tgz": _tar(
            {
                **_parallel("training/europarl-v7.fr-en", fr[0], "fr"),
                **_parallel("training/europarl-v7.de-en", de[0], "de"),
            }
        ),
        "wmt13/training-parallel-commoncrawl.tgz": _tar(
            {**_parallel("commoncrawl.fr-en", fr[1], "fr"), **_parallel("commoncrawl.de-en", de[1], "de")}
        ),
        "wmt13/training-parallel-un.tgz": _tar(_parallel("un/undoc.2000.fr-en", fr[2], "fr")),
        "wmt14/training-parallel-nc-v9.tgz": _tar(
            _parallel("training/news-commentary-v9.fr-en", fr[3], "fr")
        ),
        "wmt17/translation-task/training-parallel-nc-v12.tgz": _tar(
            _parallel("training/news-commentary-v12.de-en", de[2], "de")
        ),
        "wmt16/translation-task/training-parallel-nc-v11.tgz": _tar(
            _parallel("training-parallel-nc-v11/news-commentary-v11.de-en", de[2], "de")
        ),
        "wmt10/training-giga-fren.tar": _tar(
            {
                "giga-fren.release2.fixed.en.gz": _gz(_text([p[0] for p in fr[4]])),
                "giga-fren.release2.fixed.fr.gz": _gz(_text([p[1] for p in fr[4]])),
            },
            gz=False,
        ),
    }
    test = eval_pairs()
    src, ref = [p[0] for p in test], [p[1] for p in test]
    files["wmt14/test-full.tgz"] = _tar(
        {
            "test-full/newstest2014-fren-src.en.sgm": _sgm("src", "en", src),
            "test-full/newstest2014-fren-ref.fr.sgm": _sgm("ref", "fr", ref),
            "test-full/newstest2014-deen-src.en.sgm": _sgm("src", "en", src),
            "test-full/newstest2014-deen-ref.de.sgm": _sgm("ref", "de", ref),
        }
    )
    valid_en, valid_fr = _lines("valid.en"), _lines("valid.fr")
    files["wmt13/test.tgz"] = _tar(
        {
            "test/newstest2013-src.en.sgm": _sgm("src", "en", valid_en),
            "test/newstest2013-src.de.sgm": _sgm("src", "de", valid_fr),
        }
    )
    files["fairseq/data/iwslt14/de-en.tgz"] = _tar(iwslt_members())
    mono = _lines("mono.fr") * 3
    for recipe in MONO_RECIPES.values():
        per_year = len(mono) // len(recipe.archives) + 1
        for i, archive in enumerate(recipe.archives):
            files[url_path(archive.url)] = _gz(_text(mono[i * per_year : (i + 1) * per_year]))
    sums = []
    for path, data in sorted(files.items()):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        sums.append(f"{hashlib.sha256(data).hexdigest()}  {path}")
    (root / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return root / "SHA256SUMS"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server API
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving ``root``; yields its base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
