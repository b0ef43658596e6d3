"""The corpora of the paper configs: which archives, their pinned checksums, and where a mirror serves them.

Parallel data follows fairseq's ``prepare-wmt14en2fr.sh`` / ``prepare-wmt14en2de.sh``. statmt.org
publishes no checksums; the sha256 and byte sizes below are the ones TensorFlow Datasets pins for these
exact URLs (``tensorflow_datasets/url_checksums/wmt1{3,4,5}_translate.txt``, ``wmt_t2t_translate.txt``;
tensorflow-datasets 4.9.10 on PyPI; every file listing an archive agrees on its size and sha256). The test and dev sets come from sacrebleu's own dataset table,
verified by the md5 that sacrebleu pins.

Monolingual News Crawl for back-translation follows Edunov et al. (2018), which the Very Deep paper
follows: the shuffled, deduplicated yearly files of data.statmt.org/news-crawl. No public catalog pins
those files (TFDS has none, sacrebleu has none), so they are recorded :data:`UNPINNED` with the reason,
and the sha256 seen at download time is written to the manifest for the user to pin.

A mirror (``--mirror BASE``) serves every file under the same path as the original host
(``https://www.statmt.org/wmt13/x.tgz`` -> ``BASE/wmt13/x.tgz``); a ``--checksums`` file in
``sha256sum`` format (``<sha256>  <path>``) replaces the pins for the files it lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pipeline_lib.errors import ConfigError

UNPINNED = "no public catalog pins this file; its sha256 is recorded in the manifest at download time"


@dataclass(frozen=True)
class Archive:
    url: str
    sha256: str | None  # None: see ``why_unpinned``
    size: int | None = None
    why_unpinned: str | None = None

    def __post_init__(self) -> None:
        if (self.sha256 is None) == (self.why_unpinned is None):
            raise ValueError(f"{self.url}: give a sha256 or the reason it has none")

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Recipe:
    src: str
    tgt: str
    archives: tuple[Archive, ...]
    corpora: tuple[str, ...]  # path stems inside the extracted archives; files are {stem}.{lang}
    test: tuple[str, str]  # sacrebleu test set, language pair
    dev: tuple[str, str] | None


@dataclass(frozen=True)
class TedRecipe:
    """IWSLT's TED talks as fairseq's ``prepare-iwslt14.sh`` builds them: one archive, the training
    text in ``train.tags`` files, the test set the concatenation of XML dev/test files (in this order);
    no dev set, ``valid`` is carved from train (every 23rd line in the script)."""

    src: str
    tgt: str
    archive: Archive
    folder: str  # inside the archive
    train: str  # file stem, files are {stem}.{lang}
    test: tuple[str, ...]  # XML file stems, files are {stem}.{lang}.xml


@dataclass(frozen=True)
class MonoRecipe:
    lang: str
    archives: tuple[Archive, ...]  # one gzipped text file per year, concatenated in this order
    source: str  # where the choice of years comes from


def _statmt(path: str, size: int, sha256: str) -> Archive:
    return Archive(f"https://www.statmt.org/{path}", sha256, size)


EUROPARL_V7 = _statmt(
    "wmt13/training-parallel-europarl-v7.tgz",
    657632379,
    "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
)
COMMONCRAWL = _statmt(
    "wmt13/training-parallel-commoncrawl.tgz",
    918311367,
    "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
)
UN = _statmt(
    "wmt13/training-parallel-un.tgz",
    2365634246,
    "29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47",
)
NEWS_COMMENTARY_V9 = _statmt(
    "wmt14/training-parallel-nc-v9.tgz",
    80418416,
    "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",
)
# fairseq's prepare-wmt14en2de.sh:21 (without --icml17) and Transformer-Clinic's pre-process/wmt14en-de.sh:21
# fetch it from data.statmt.org; sha256 and size as TFDS pins that URL (url_checksums/wmt17_translate.txt).
NEWS_COMMENTARY_V12 = Archive(
    "https://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz",
    "2b45f30ef1d550d302fd17dd3a5cbe19134ccc4c2cf50c2dae534aee600101a2",
    168591139,
)
# google/seq2seq bin/data/wmt16_en_de.sh:36-38 (the script that made the WMT'16 En-De archive DLCL trains on)
NEWS_COMMENTARY_V11 = Archive(
    "https://data.statmt.org/wmt16/translation-task/training-parallel-nc-v11.tgz",
    "cfe8ab047e05043476e498ee765c98e939c7b7d6d294e856344c84476b619d6a",
    75178032,
)
GIGA_FREN = _statmt(
    "wmt10/training-giga-fren.tar",
    2595102720,
    "3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a",
)

RECIPES: dict[str, Recipe] = {
    "wmt14-en-fr": Recipe(
        src="en",
        tgt="fr",
        archives=(EUROPARL_V7, COMMONCRAWL, UN, NEWS_COMMENTARY_V9, GIGA_FREN),
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
    # News Commentary v12, as the Very Deep paper's En-De data (t2t translate_ende.py, which it mimics)
    # and Transformer-Clinic's pre-process/wmt14en-de.sh:21,35 use; fairseq's v9 only with --icml17.
    "wmt14-en-de": Recipe(
        src="en",
        tgt="de",
        archives=(EUROPARL_V7, COMMONCRAWL, NEWS_COMMENTARY_V12),
        corpora=("training/europarl-v7.de-en", "commoncrawl.de-en", "training/news-commentary-v12.de-en"),
        test=("wmt14/full", "en-de"),
        dev=("wmt13", "en-de"),
    ),
    # Wang et al. 2019 (DLCL) train on Google's preprocessed "wmt16_en_de.tar.gz" (dlcl
    # runs/prepare-wmt-en2de.sh:4-18), a Google Drive file with no stable URL and no published checksum.
    # It is rebuilt here from the script that made it (google/seq2seq @7f48589 bin/data/wmt16_en_de.sh):
    # Europarl v7 + Common Crawl + News Commentary v11 (:28-38,60-70); the Europarl text comes from the
    # WMT'13 archive (the same europarl-v7.de-en files as statmt.org/europarl/v7/de-en.tgz, :29-30).
    "wmt16-en-de-google": Recipe(
        src="en",
        tgt="de",
        archives=(EUROPARL_V7, COMMONCRAWL, NEWS_COMMENTARY_V11),
        corpora=(
            "training/europarl-v7.de-en",
            "commoncrawl.de-en",
            "training-parallel-nc-v11/news-commentary-v11.de-en",
        ),
        test=("wmt14/full", "en-de"),
        dev=("wmt13", "en-de"),
    ),
}


UNPINNED_IWSLT = (
    "fairseq's prepare-iwslt14.sh publishes no checksum for its copy of the IWSLT'14 archive and no "
    "catalog pins it; its sha256 is recorded in the manifest at download time"
)
# The IWSLT'14 De-En archive as fairseq's prepare-iwslt14.sh fetches it since the WIT3 site went away.
TED_RECIPES: dict[str, TedRecipe] = {
    "iwslt14-de-en": TedRecipe(
        src="de",
        tgt="en",
        archive=Archive(
            "https://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz", None, why_unpinned=UNPINNED_IWSLT
        ),
        folder="de-en",
        train="train.tags.de-en",
        test=(
            "IWSLT14.TED.dev2010.de-en",
            "IWSLT14.TEDX.dev2012.de-en",
            "IWSLT14.TED.tst2010.de-en",
            "IWSLT14.TED.tst2011.de-en",
            "IWSLT14.TED.tst2012.de-en",
        ),
    ),
}


def _news_crawl(lang: str, years: range) -> tuple[Archive, ...]:
    return tuple(
        Archive(
            f"https://data.statmt.org/news-crawl/{lang}/news.{year}.{lang}.shuffled.deduped.gz",
            None,
            why_unpinned=UNPINNED,
        )
        for year in years
    )


MONO_RECIPES: dict[str, MonoRecipe] = {
    # Edunov et al. 2018 back-translate the German News Crawl 2007-2017 (226M sentences after
    # deduplication). The Very Deep paper generates 21.8M En-Fr pairs; French years stop at 2013 so
    # that no crawl of the newstest2014 period can leak test sentences into training.
    "news-crawl-de": MonoRecipe("de", _news_crawl("de", range(2007, 2018)), "Edunov et al. 2018, §4.1"),
    "news-crawl-fr": MonoRecipe("fr", _news_crawl("fr", range(2007, 2014)), "WMT'14-era News Crawl"),
}


def all_archives() -> list[Archive]:
    seen: dict[str, Archive] = {}
    for recipe in RECIPES.values():
        seen.update((a.url, a) for a in recipe.archives)
    for mono in MONO_RECIPES.values():
        seen.update((a.url, a) for a in mono.archives)
    for ted in TED_RECIPES.values():
        seen[ted.archive.url] = ted.archive
    return list(seen.values())


def url_path(url: str) -> str:
    """The part of a URL a mirror keeps: ``https://host/a/b.tgz`` -> ``a/b.tgz``."""
    return urlsplit(url).path.lstrip("/")


class Source:
    """Where each archive is fetched from and which checksum it must have."""

    def __init__(self, mirror: str | None = None, checksums: Path | None = None) -> None:
        self.mirror = mirror.rstrip("/") if mirror else None
        self.pins: dict[str, str] = read_checksums(checksums) if checksums else {}
        if checksums and not self.mirror:
            raise ConfigError("--checksums replaces the pins of a mirror's files: give --mirror too")

    def url(self, url: str) -> str:
        return f"{self.mirror}/{url_path(url)}" if self.mirror else url

    def sha256(self, archive: Archive) -> str | None:
        return self.pins.get(url_path(archive.url), archive.sha256)

    def size(self, archive: Archive) -> int | None:
        # A checksums file describes other bytes than the original's: its size no longer applies.
        return None if url_path(archive.url) in self.pins else archive.size

    def pinned(self, url: str) -> str | None:
        return self.pins.get(url_path(url))


def read_checksums(path: Path) -> dict[str, str]:
    """``sha256sum`` output: ``<64 hex>  <path>`` per line (``*`` binary marker allowed)."""
    pins = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if (
            len(parts) != 2
            or len(parts[0]) != 64
            or any(c not in "0123456789abcdef" for c in parts[0].lower())
        ):
            raise ConfigError(f"{path}:{number}: expected '<sha256>  <path>', got {line!r}")
        pins[parts[1].strip().lstrip("*").lstrip("/")] = parts[0].lower()
    return pins
