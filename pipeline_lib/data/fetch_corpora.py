"""The ``download`` stage: fetch and extract corpora over HTTP(S), resumable and verified (the command
line, with its usage, is ``cli_download.py``).

A recipe (the corpora of fairseq's ``prepare-wmt14en2fr.sh`` / ``prepare-wmt14en2de.sh``) downloads
the archives into ``{out}/orig``, verifies each against the sha256 and size pinned in
:mod:`pipeline_lib.data.recipes`, extracts them, concatenates the training corpora into
``{out}/raw/train.{en,fr}`` and fetches the official test (and, for En-De, dev) sets from sacrebleu's
table, verified by sacrebleu's md5, into ``{out}/raw/test.*`` / ``{out}/raw/valid.*``. En-Fr has no
dev set in the recipe: ``preprocess --valid-every 1333`` carves it from train as fairseq does.
``{out}/orig/manifest.json`` records every file's URL, size, sha256 (and md5 for sacrebleu's).

``--recipe iwslt14-de-en`` follows fairseq's ``prepare-iwslt14.sh``: the TED archive's
``train.tags`` files (metadata lines dropped) become ``raw/train.*`` and its five XML dev/test files,
concatenated in the script's order, ``raw/test.*``; the config carves valid from train
(``valid_every: 23``) and lowercases (``lowercase: true``), as the script does.

Smoke tests and institutional mirrors: ``--mirror BASE`` fetches every file (sacrebleu's included)
from ``BASE/<path of the original URL>``; ``--checksums FILE`` (``sha256sum`` format, paths as on
the mirror) replaces the pins for the files it lists.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup, atomic_open, write_bytes, write_text
from pipeline_lib.data.download import DownloadError, extract, fetch, file_digest, sha256_file
from pipeline_lib.data.recipes import MONO_RECIPES, RECIPES, TED_RECIPES, Archive, Source
from pipeline_lib.data.ted_text import train_tag_lines, xml_seg_lines
from pipeline_lib.data.textio import count_lines, decode_line, read_lines
from pipeline_lib.errors import InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Network:
    """How hard a fetch tries: retries, the first retry delay in seconds (doubling), socket timeout."""

    retries: int = 5
    backoff: float = 2.0
    timeout: float = 60.0

    def kwargs(self) -> dict:
        return {"retries": self.retries, "backoff": self.backoff, "timeout": self.timeout}


class Manifest:
    """``manifest.json`` beside the downloads: what was fetched from where, with its checksums."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries = json.loads(path.read_text()) if path.is_file() else {}

    def add(self, name: str, entry: dict) -> None:
        self.entries[name] = entry
        write_text(self.path, json.dumps(self.entries, indent=2) + "\n")


def _fetch_archive(net: Network, source: Source, archive: Archive, orig: Path, manifest: Manifest) -> Path:
    sha = source.sha256(archive)
    if sha is None:
        log.warning("%s: unpinned (%s)", archive.url, archive.why_unpinned)
    url = source.url(archive.url)
    path = fetch(url, orig / archive.name, sha256=sha, size=source.size(archive), **net.kwargs())
    manifest.add(
        archive.name,
        {
            "url": url,
            "bytes": path.stat().st_size,
            "sha256": sha or sha256_file(path),
            "pinned": sha is not None,
        },
    )
    return path


def fetch_urls(
    urls: Sequence[str],
    shas: Sequence[str | None],
    sizes: Sequence[int | None],
    orig: Path,
    net: Network,
    extract_archives: bool = False,
) -> list[Path]:
    """Fetch each URL into ``orig`` (checked against its sha256/size where given), recorded in
    ``orig/manifest.json``; with ``extract_archives``, extract each there too."""
    manifest = Manifest(orig / "manifest.json")
    paths = []
    for url, sha, size in zip(urls, shas, sizes, strict=True):
        name = url.rstrip("/").rsplit("/", 1)[-1] or "download"
        path = fetch(url, orig / name, sha256=sha, size=size, **net.kwargs())
        manifest.add(name, {"url": url, "bytes": path.stat().st_size, "sha256": sha or sha256_file(path)})
        paths.append(path)
    if extract_archives:
        for path in paths:
            log.info("extracted %s", extract(path, orig))
    return paths


def _find(root: Path, stem: str, lang: str) -> Path:
    for cand in (f"{stem}.{lang}", f"{stem}.{lang}.gz"):
        hits = sorted(root.glob(f"*/{cand}"))
        if hits:
            return extract(hits[0], hits[0].parent) if cand.endswith(".gz") else hits[0]
    raise InputError(f"{root}: no {stem}.{lang} in the extracted archives")


def _sacrebleu_set(
    net: Network, source: Source, spec: tuple[str, str], manifest: Manifest
) -> tuple[Path, Path]:
    """A sacrebleu test set, its tarball fetched by :func:`fetch` (mirror, retries) into sacrebleu's
    cache and checked against sacrebleu's md5 (or the mirror's sha256) before sacrebleu reads it."""
    from sacrebleu.dataset import DATASETS
    from sacrebleu.utils import extract_tarball

    test_set, langpair = spec
    dataset = DATASETS[test_set]
    md5s = dataset.md5 or [None] * len(dataset.data)
    for url, md5 in zip(dataset.data, md5s, strict=True):
        tarball = Path(dataset._rawdir) / dataset._get_tarball_filename(url)
        sha = source.pinned(url)
        fetched = source.url(url)
        if not tarball.is_file() or tarball.stat().st_size == 0:
            fetch(fetched, tarball, sha256=sha, **net.kwargs())
            got = file_digest(tarball, "md5")
            if sha is None and md5 is not None and got != md5:
                tarball.unlink()
                raise DownloadError(
                    f"{fetched}: md5 mismatch, expected {md5} (sacrebleu), got {got}; file removed"
                )
            extract_tarball(str(tarball), dataset._rawdir)
        manifest.add(
            tarball.name,
            {
                "url": fetched,
                "bytes": tarball.stat().st_size,
                "sha256": sha256_file(tarball),
                "md5": file_digest(tarball, "md5"),
                "md5_sacrebleu": md5,
                "verified_by": "mirror sha256" if sha else "sacrebleu md5",
            },
        )
    try:
        return Path(dataset.get_source_file(langpair)), Path(dataset.get_reference_files(langpair)[0])
    except Exception as exc:
        raise InputError(f"sacrebleu could not read {test_set} {langpair}: {exc}") from exc
    except SystemExit as exc:  # sacrebleu exits on some errors
        raise InputError(f"sacrebleu could not read {test_set} {langpair} (exit {exc.code})") from None


def _fetch_ted_recipe(name: str, out_dir: Path, source: Source, net: Network) -> None:
    """raw/train.* from the train.tags files, raw/test.* from the XML dev/test files, concatenated."""
    recipe = TED_RECIPES[name]
    orig = out_dir / "orig"
    manifest = Manifest(orig / "manifest.json")
    archive = _fetch_archive(net, source, recipe.archive, orig, manifest)
    folder = extract(archive, orig / "extracted") / recipe.folder
    raw = out_dir / "raw"
    with AtomicGroup() as group:
        for lang in (recipe.src, recipe.tgt):
            train = folder / f"{recipe.train}.{lang}"
            if not train.is_file():
                raise InputError(f"{archive}: no {recipe.folder}/{train.name} in the archive")
            with group.tmp_for(raw / f"train.{lang}").open("w", encoding="utf-8", newline="\n") as out:
                for line in train_tag_lines(train):
                    out.write(line + "\n")
            with group.tmp_for(raw / f"test.{lang}").open("w", encoding="utf-8", newline="\n") as out:
                for stem in recipe.test:
                    xml = folder / f"{stem}.{lang}.xml"
                    if not xml.is_file():
                        raise InputError(f"{archive}: no {recipe.folder}/{xml.name} in the archive")
                    for line in xml_seg_lines(xml):
                        out.write(line + "\n")
    n_train, n_test = (_aligned_pairs(raw, split, recipe.src, recipe.tgt) for split in ("train", "test"))
    log.info("%s: %d training pairs (valid is carved from them), %d test pairs in %s",
             name, n_train, n_test, raw)  # fmt: skip


def _aligned_pairs(raw: Path, split: str, src: str, tgt: str) -> int:
    """The pair count of ``raw/{split}.*``, which must have as many source lines as target lines."""
    n_src, n_tgt = count_lines(raw / f"{split}.{src}"), count_lines(raw / f"{split}.{tgt}")
    if n_src != n_tgt:
        raise InputError(f"{raw}/{split}.{tgt}: {n_tgt} lines but {split}.{src} has {n_src}")
    return n_src


def fetch_recipe(
    name: str, out_dir: Path, source: Source, net: Network, manifest_copy: Path | None = None
) -> None:
    """The parallel corpus recipe ``name`` (``RECIPES`` or ``TED_RECIPES``): archives into
    ``out_dir/orig``, ``out_dir/raw/{split}.{lang}``; ``manifest_copy`` gets a copy of the manifest."""
    if name in TED_RECIPES:
        _fetch_ted_recipe(name, out_dir, source, net)
    else:
        _fetch_wmt_recipe(name, out_dir, source, net)
    if manifest_copy:
        write_bytes(manifest_copy, (out_dir / "orig" / "manifest.json").read_bytes())


def _fetch_wmt_recipe(name: str, out_dir: Path, source: Source, net: Network) -> None:
    recipe = RECIPES[name]
    orig = out_dir / "orig"
    manifest = Manifest(orig / "manifest.json")
    archives = [_fetch_archive(net, source, a, orig, manifest) for a in recipe.archives]
    ext = orig / "extracted"
    for a in archives:
        extract(a, ext)
    raw = out_dir / "raw"
    sets = {"test": recipe.test, "valid": recipe.dev}
    eval_files = {split: _sacrebleu_set(net, source, spec, manifest) for split, spec in sets.items() if spec}
    with AtomicGroup() as group:
        for lang in (recipe.src, recipe.tgt):
            with group.tmp_for(raw / f"train.{lang}").open("w", encoding="utf-8", newline="\n") as out:
                for stem in recipe.corpora:
                    for line in read_lines(_find(ext, stem, lang)):
                        out.write(line + "\n")
        for split, (src_file, ref_file) in eval_files.items():
            for lang, f in ((recipe.src, src_file), (recipe.tgt, ref_file)):
                with group.tmp_for(raw / f"{split}.{lang}").open("w", encoding="utf-8", newline="\n") as out:
                    for line in read_lines(f):
                        out.write(line + "\n")
    n_train = _aligned_pairs(raw, "train", recipe.src, recipe.tgt)
    log.info("%s: %d training pairs in %s", name, n_train, raw)


def fetch_mono_recipe(
    name: str, out_dir: Path, output: Path, max_lines: int | None, source: Source, net: Network
) -> None:
    """Concatenate the recipe's gzipped yearly files (streamed, never unpacked) into ``output``, up to
    ``max_lines``; the downloads and their manifest go to ``out_dir``."""
    recipe = MONO_RECIPES[name]
    manifest = Manifest(out_dir / "manifest.json")
    written = 0
    with atomic_open(output) as out:
        for archive in recipe.archives:
            if max_lines is not None and written >= max_lines:
                break
            path = _fetch_archive(net, source, archive, out_dir, manifest)
            try:
                with gzip.open(path, "rb") as f:
                    for lineno, raw in enumerate(f, 1):
                        if max_lines is not None and written >= max_lines:
                            break
                        out.write(decode_line(path, lineno, raw) + "\n")
                        written += 1
            except (OSError, EOFError) as exc:
                raise InputError(f"{path}: cannot gunzip ({exc})") from exc
    log.info(
        "%s: %d lines of %s -> %s (source: %s)",
        name,
        written,
        recipe.lang,
        output,
        recipe.source,
    )
