"""The ``prepare-ding`` stage: German-English example sentences from Debian's ``trans-de-en`` (Ding;
the command line is ``cli_ding.py``).

The package (GPL-2+) is fetched with ``apt-get download trans-de-en`` into ``--resources``
(default ``$DEEPNMT_RESOURCES`` or ``resources/``; kept and reused) and unpacked with
``dpkg-deb -x`` into a temp dir: neither needs root. ``usr/share/trans/de-en`` holds one
entry per line, ``DE | DE ... :: EN | EN ...``, the ``|``-separated parts aligned. We keep the
aligned parts that are whole sentences on both sides (capitalised, ending in ``.!?``, at least
three words, no ``…`` elision, no ``/`` or ``;`` alternatives), drop ``{..}``/``[..]``
annotations and repeated pairs (~18.7k pairs). Sentences are independent, so valid/test are a
seeded random sample of pairs (identical German sides never straddle splits, as duplicates
are removed first). Outputs ``{train,valid,test}.{de,en}`` and ``splits.json``.
"""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import tempfile
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data.textio import read_lines
from pipeline_lib.errors import InputError

log = logging.getLogger(__name__)
PACKAGE = "trans-de-en"
DICT_PATH = "usr/share/trans/de-en"
_ANNOT = re.compile(r"\s*(\{[^}]*\}|\[[^\]]*\])")
_SENT = re.compile(r"^[A-ZÄÖÜ\"'„].*[.!?]['\"“]?$")


def ensure_deb(resources: Path) -> Path:
    resources.mkdir(parents=True, exist_ok=True)
    debs = sorted(resources.glob(f"{PACKAGE}_*_all.deb"))
    if debs:
        return debs[-1]
    log.info("apt-get download %s into %s", PACKAGE, resources)
    proc = subprocess.run(["apt-get", "download", PACKAGE], cwd=resources, capture_output=True, text=True)
    debs = sorted(resources.glob(f"{PACKAGE}_*_all.deb"))
    if proc.returncode != 0 or not debs:
        raise InputError(f"apt-get download {PACKAGE} failed: {proc.stderr.strip()[-300:]}")
    return debs[-1]


def _sentence(text: str) -> str | None:
    text = " ".join(_ANNOT.sub("", text).split())
    if "…" in text or "..." in text or "/" in text or ";" in text or len(text.split()) < 3:
        return None
    return text if _SENT.match(text) else None


def extract_pairs(dict_file: Path) -> list[tuple[str, str]]:
    """Aligned (German, English) example sentences of the Ding dictionary, deduplicated."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for line in read_lines(dict_file):
        if line.startswith("#") or line.count(" :: ") != 1:
            continue
        de, en = line.split(" :: ")
        de_parts, en_parts = de.split(" | "), en.split(" | ")
        if len(de_parts) != len(en_parts):
            continue
        for d, e in zip(de_parts, en_parts, strict=True):
            d2, e2 = _sentence(d), _sentence(e)
            if d2 and e2 and d2 not in seen:
                seen.add(d2)
                pairs.append((d2, e2))
    return pairs


def build_ding_corpus(
    out_dir: Path,
    resources: Path,
    src: str = "de",
    tgt: str = "en",
    valid_size: int = 500,
    test_size: int = 1000,
    seed: int = 1,
) -> None:
    """Write Ding's sentence pairs into ``out_dir``: seeded random valid/test draws, the rest train;
    the .deb is cached in ``resources``."""
    deb = ensure_deb(resources)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(["dpkg-deb", "-x", str(deb), tmp], capture_output=True, text=True)
        if proc.returncode != 0:
            raise InputError(f"{deb}: dpkg-deb -x failed: {proc.stderr.strip()}")
        pairs = extract_pairs(Path(tmp) / DICT_PATH)
    if len(pairs) <= valid_size + test_size:
        raise InputError(f"{deb}: only {len(pairs)} sentence pairs, too few for the requested splits")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    cut = {
        "valid": order[:valid_size],
        "test": order[valid_size : valid_size + test_size],
    }
    cut["train"] = sorted(order[valid_size + test_size :])
    col = {"de": 0, "en": 1}
    summary = {}
    with AtomicGroup() as group:
        for split, idx in cut.items():
            idx = sorted(idx)
            for lang in (src, tgt):
                with group.tmp_for(out_dir / f"{split}.{lang}").open(
                    "w", encoding="utf-8", newline="\n"
                ) as f:
                    for i in idx:
                        f.write(pairs[i][col[lang]] + "\n")
            summary[split] = len(idx)
        info = {"source": f"Debian {deb.name} ({DICT_PATH})", "seed": seed, "pairs": summary}
        group.tmp_for(out_dir / "splits.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    log.info("ding: %s", summary)
