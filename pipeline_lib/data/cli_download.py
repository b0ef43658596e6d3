"""``download``: fetch and extract corpora over HTTP(S), resumable and verified.

Generic use (any number of URLs; ``--sha256``/``--size`` given per URL, in the same order)::

    python -m pipeline_lib download --out-dir work/x/orig --url https://host/a.tgz \\
        --sha256 <hex> [--size BYTES] [--extract] [--retries 5] [--timeout 60]

Recipe use (the corpora of fairseq's ``prepare-wmt14en2fr.sh`` / ``prepare-wmt14en2de.sh``)::

    python -m pipeline_lib download --recipe wmt14-en-fr --out-dir work/wmt14_en_fr

downloads the archives into ``{out}/orig``, extracts them, concatenates the training corpora
into ``{out}/raw/train.{en,fr}`` and fetches the official test (and, for En-De, dev) sets
through sacrebleu into ``{out}/raw/test.*`` / ``{out}/raw/valid.*``. En-Fr has no dev set in the
recipe: ``preprocess --valid-every 1333`` carves it from train as fairseq does. statmt.org
publishes no checksums, so recipe downloads are verified by size/completeness only; the
sha256 of every file is written to ``{out}/orig/manifest.json`` for later pinning.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup, write_bytes, write_text
from pipeline_lib.data.download import extract, fetch, sha256_file
from pipeline_lib.data.textio import count_lines, read_lines
from pipeline_lib.errors import ConfigError, InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recipe:
    src: str
    tgt: str
    urls: tuple[str, ...]
    corpora: tuple[str, ...]  # path stems inside the extracted archives; files are {stem}.{lang}
    test: tuple[str, str]  # sacrebleu test set, language pair
    dev: tuple[str, str] | None


RECIPES: dict[str, Recipe] = {
    "wmt14-en-fr": Recipe(
        src="en",
        tgt="fr",
        urls=(
            "http://statmt.org/wmt13/training-parallel-europarl-v7.tgz",
            "http://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
            "http://statmt.org/wmt13/training-parallel-un.tgz",
            "http://statmt.org/wmt14/training-parallel-nc-v9.tgz",
            "http://statmt.org/wmt10/training-giga-fren.tar",
        ),
        corpora=(
            "training/europarl-v7.fr-en",
            "commoncrawl.fr-en",
            "un/undoc.2000.fr-en",
            "training/news-commentary-v9.fr-en",
            "giga-fren.release2.fixed",
        ),
        test=("wmt14/full", "en-fr"),
        dev=None,
    ),
    "wmt14-en-de": Recipe(
        src="en",
        tgt="de",
        urls=(
            "http://statmt.org/wmt13/training-parallel-europarl-v7.tgz",
            "http://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
            "http://statmt.org/wmt14/training-parallel-nc-v9.tgz",
        ),
        corpora=("training/europarl-v7.de-en", "commoncrawl.de-en", "training/news-commentary-v9.de-en"),
        test=("wmt14/full", "en-de"),
        dev=("wmt13", "en-de"),
    ),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--url", action="append", default=[], help="URL to fetch (repeatable)")
    p.add_argument("--sha256", action="append", default=[], help="expected sha256, one per --url")
    p.add_argument("--size", action="append", type=int, default=[], help="expected bytes, one per --url")
    p.add_argument("--extract", action="store_true", help="extract .tgz/.tar/.gz/.sgm after download")
    p.add_argument("--recipe", choices=sorted(RECIPES), default=None)
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


def _fetch_all(args: argparse.Namespace, urls: list[str], orig: Path) -> list[Path]:
    shas = _per_url(args.sha256, urls, "--sha256")
    sizes = _per_url(args.size, urls, "--size")
    paths = []
    manifest_path = orig / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    for url, sha, size in zip(urls, shas, sizes, strict=True):
        name = url.rstrip("/").rsplit("/", 1)[-1] or "download"
        path = fetch(
            url,
            orig / name,
            sha256=sha,
            size=size,
            retries=args.retries,
            backoff=args.backoff,
            timeout=args.timeout,
        )
        manifest[name] = {"url": url, "bytes": path.stat().st_size, "sha256": sha or sha256_file(path)}
        paths.append(path)
    write_text(manifest_path, json.dumps(manifest, indent=2) + "\n")
    return paths


def _find(root: Path, stem: str, lang: str) -> Path:
    for cand in (f"{stem}.{lang}", f"{stem}.{lang}.gz"):
        hits = sorted(root.glob(f"*/{cand}"))
        if hits:
            return extract(hits[0], hits[0].parent) if cand.endswith(".gz") else hits[0]
    raise InputError(f"{root}: no {stem}.{lang} in the extracted archives")


def _sacrebleu_set(test_set: str, langpair: str, src: str, tgt: str) -> tuple[Path, Path]:
    from sacrebleu.utils import get_reference_files, get_source_file

    try:
        src_file = get_source_file(test_set, langpair)
        ref_file = get_reference_files(test_set, langpair)[0]
    except Exception as exc:  # sacrebleu exits or raises on network errors
        raise InputError(f"sacrebleu could not fetch {test_set} {langpair}: {exc}") from exc
    except SystemExit as exc:
        raise InputError(f"sacrebleu could not fetch {test_set} {langpair} (exit {exc.code})") from None
    # sacrebleu names files by its own pair order; source is always the --recipe source side.
    return Path(src_file), Path(ref_file)


def _run_recipe(args: argparse.Namespace) -> None:
    recipe = RECIPES[args.recipe]
    orig = args.out_dir / "orig"
    archives = _fetch_all(args, list(recipe.urls), orig)
    ext = orig / "extracted"
    for a in archives:
        extract(a, ext)
    raw = args.out_dir / "raw"
    with AtomicGroup() as group:
        for lang in (recipe.src, recipe.tgt):
            with group.tmp_for(raw / f"train.{lang}").open("w", encoding="utf-8", newline="\n") as out:
                for stem in recipe.corpora:
                    for line in read_lines(_find(ext, stem, lang)):
                        out.write(line + "\n")
        for split, spec in (("test", recipe.test), ("valid", recipe.dev)):
            if spec is None:
                continue
            src_file, ref_file = _sacrebleu_set(*spec, recipe.src, recipe.tgt)
            for lang, f in ((recipe.src, src_file), (recipe.tgt, ref_file)):
                with group.tmp_for(raw / f"{split}.{lang}").open("w", encoding="utf-8", newline="\n") as out:
                    for line in read_lines(f):
                        out.write(line + "\n")
    n_src, n_tgt = count_lines(raw / f"train.{recipe.src}"), count_lines(raw / f"train.{recipe.tgt}")
    if n_src != n_tgt:
        raise InputError(f"{raw}/train.{recipe.tgt}: {n_tgt} lines but train.{recipe.src} has {n_src}")
    log.info("%s: %d training pairs in %s", args.recipe, n_src, raw)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.retries < 0:
        raise ConfigError(f"--retries must be >= 0, got {args.retries}")
    if args.recipe:
        if args.url:
            raise ConfigError("--recipe and --url are exclusive")
        _run_recipe(args)
        if args.manifest_copy:
            write_bytes(args.manifest_copy, (args.out_dir / "orig" / "manifest.json").read_bytes())
        return 0
    if not args.url:
        raise ConfigError("give --url (repeatable) or --recipe")
    for path in _fetch_all(args, args.url, args.out_dir):
        if args.extract:
            log.info("extracted %s", extract(path, args.out_dir))
    return 0
