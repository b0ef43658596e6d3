"""``prepare-demo``: the offline En-Fr demo corpus (World English Bible x Louis Segond 1910).

Usage::

    python -m pipeline_lib prepare-demo --out-dir work/demo/raw \\
        [--resources resources/] [--valid-books ...] [--test-books ...] [--mono-books ...]

Where the corpus comes from, its cleaning and its splits: ``pipeline_lib/data/bible_corpus.py``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline_lib.data.bible_corpus import BIBLES, DEFAULT_TEST, DEFAULT_VALID, build_demo_corpus, language
from pipeline_lib.data.resources import resources_dir
from pipeline_lib.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--resources", type=Path, default=None, help="wheel cache (default $DEEPNMT_RESOURCES)")
    p.add_argument("--src", default="en", choices=sorted(BIBLES), help="source Bible (en = WEB 2000)")
    p.add_argument("--tgt", default="fr", choices=sorted(BIBLES), help="target Bible (fr = Segond 1910)")
    p.add_argument("--valid-books", nargs="*", default=DEFAULT_VALID)
    p.add_argument("--test-books", nargs="*", default=DEFAULT_TEST)
    p.add_argument("--mono-books", nargs="*", default=[], help="target side -> mono.{tgt} (back-translation)")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if language(args.src) == language(args.tgt):
        raise ConfigError("--src and --tgt must be different languages")
    build_demo_corpus(
        args.out_dir,
        args.resources or resources_dir(),
        args.src,
        args.tgt,
        valid_books=args.valid_books,
        test_books=args.test_books,
        mono_books=args.mono_books,
    )
    return 0
