"""``download``: fetch and extract corpora over HTTP(S), resumable and verified.

Generic use (any number of URLs; ``--sha256``/``--size`` given per URL, in the same order)::

    python -m pipeline_lib download --out-dir work/x/orig --url https://host/a.tgz \\
        --sha256 <hex> [--size BYTES] [--extract] [--retries 5] [--timeout 60]

Recipe use (the corpora of fairseq's ``prepare-wmt14en2fr.sh`` / ``prepare-wmt14en2de.sh``)::

    python -m pipeline_lib download --recipe wmt14-en-fr --out-dir work/wmt14_en_fr

(what a recipe downloads, verifies and writes: :mod:`pipeline_lib.data.fetch_corpora`)

Monolingual use (News Crawl for back-translation)::

    python -m pipeline_lib download --mono-recipe news-crawl-fr --out-dir work/x/orig_mono \
        --output work/x/raw/mono.fr [--max-lines 21800000]

Smoke tests and institutional mirrors: ``--mirror BASE`` fetches every file (sacrebleu's included)
from ``BASE/<path of the original URL>``; ``--checksums FILE`` (``sha256sum`` format, paths as on
the mirror) replaces the pins for the files it lists. The stage itself: ``fetch_corpora.py``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline_lib.data.fetch_corpora import Network, fetch_mono_recipe, fetch_recipe, fetch_urls
from pipeline_lib.data.recipes import MONO_RECIPES, RECIPES, TED_RECIPES, Source
from pipeline_lib.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--url", action="append", default=[], help="URL to fetch (repeatable)")
    p.add_argument("--sha256", action="append", default=[], help="expected sha256, one per --url")
    p.add_argument("--size", action="append", type=int, default=[], help="expected bytes, one per --url")
    p.add_argument("--extract", action="store_true", help="extract .tgz/.tar/.gz/.sgm after download")
    p.add_argument(
        "--recipe", choices=sorted([*RECIPES, *TED_RECIPES]), default=None, help="parallel corpus recipe"
    )
    p.add_argument("--mono-recipe", choices=sorted(MONO_RECIPES), default=None, help="monolingual recipe")
    p.add_argument("--output", type=Path, help="with --mono-recipe: the text file to write")
    p.add_argument("--max-lines", type=int, default=None, help="with --mono-recipe: keep the first N lines")
    p.add_argument("--mirror", default=None, help="fetch every file from BASE/<original URL path>")
    p.add_argument(
        "--checksums", type=Path, default=None, help="sha256sum-format pins replacing the recipe's (mirror)"
    )
    p.add_argument(
        "--manifest-copy",
        type=Path,
        default=None,
        help="with --recipe: copy the download manifest here when done",
    )
    p.add_argument("--retries", type=int, default=5)
    p.add_argument("--backoff", type=float, default=2.0, help="first retry delay in seconds (doubles)")
    p.add_argument("--timeout", type=float, default=60.0, help="socket timeout in seconds")


def _per_url(values: list, urls: list[str], flag: str) -> list:
    if values and len(values) != len(urls):
        raise ConfigError(f"{flag}: give one value per --url ({len(urls)} URLs, {len(values)} values)")
    return values or [None] * len(urls)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.retries < 0:
        raise ConfigError(f"--retries must be >= 0, got {args.retries}")
    if sum(bool(x) for x in (args.recipe, args.mono_recipe, args.url)) > 1:
        raise ConfigError("--recipe, --mono-recipe and --url are exclusive")
    source = Source(args.mirror, args.checksums)
    net = Network(args.retries, args.backoff, args.timeout)
    if args.recipe:
        fetch_recipe(args.recipe, args.out_dir, source, net, manifest_copy=args.manifest_copy)
        return 0
    if args.mono_recipe:
        if args.output is None:
            raise ConfigError("--mono-recipe needs --output")
        if args.max_lines is not None and args.max_lines < 1:
            raise ConfigError(f"--max-lines must be >= 1, got {args.max_lines}")
        fetch_mono_recipe(args.mono_recipe, args.out_dir, args.output, args.max_lines, source, net)
        return 0
    if not args.url:
        raise ConfigError("give --url (repeatable), --recipe or --mono-recipe")
    shas = _per_url(args.sha256, args.url, "--sha256")
    sizes = _per_url(args.size, args.url, "--size")
    fetch_urls(args.url, shas, sizes, args.out_dir, net, extract_archives=args.extract)
    return 0
