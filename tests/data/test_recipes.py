"""The paper recipes: every archive pinned (or its lack of a pin stated), https everywhere, the schema
in step with the recipe tables, and the recipe download run against a miniature statmt.org mirror
served over real HTTP: verified, extracted, assembled; a one-byte change is a sha256 error naming
the URL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from wmt_mirror import QUOTED_TEST_LINE, build, eval_pairs, serve

from pipeline_lib.cli import main
from pipeline_lib.data.recipes import (
    MONO_RECIPES,
    RECIPES,
    TED_RECIPES,
    UNPINNED,
    UNPINNED_IWSLT,
    Source,
    all_archives,
    read_checksums,
    url_path,
)
from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema

REPO = Path(__file__).resolve().parents[2]


def test_every_wmt_archive_is_pinned_and_only_news_crawl_and_iwslt_are_not():
    mono_urls = {a.url for m in MONO_RECIPES.values() for a in m.archives}
    ted_urls = {t.archive.url for t in TED_RECIPES.values()}
    for archive in all_archives():
        if archive.url in mono_urls | ted_urls:
            reason = UNPINNED if archive.url in mono_urls else UNPINNED_IWSLT
            assert archive.sha256 is None and archive.why_unpinned == reason, archive
            continue
        assert re.fullmatch(r"[0-9a-f]{64}", archive.sha256 or ""), archive
        assert archive.size and archive.size > 10**7, archive  # the real archives are tens of MB and up


def test_every_url_is_https_including_sacrebleus_test_sets():
    from sacrebleu.dataset import DATASETS

    urls = [a.url for a in all_archives()]
    for recipe in RECIPES.values():
        for spec in (recipe.test, recipe.dev):
            if spec:
                urls += DATASETS[spec[0]].data
    assert urls and all(u.startswith("https://") for u in urls), [
        u for u in urls if not u.startswith("https://")
    ]


def test_schema_lists_exactly_the_recipes():
    ds = load_schema(REPO / SCHEMA_FILE)["properties"]["datasets"]["additionalProperties"]["properties"]
    assert set(ds["recipe"]["enum"]) == set(RECIPES) | set(TED_RECIPES)
    mono_object = ds["mono"]["oneOf"][1]
    assert set(mono_object["properties"]["recipe"]["enum"]) == set(MONO_RECIPES)


def test_checksums_file_errors_name_file_and_line(tmp_path: Path):
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{'a' * 64}  wmt13/x.tgz\nnot a checksum line\n")
    with pytest.raises(ConfigError, match=r"SHA256SUMS:2: expected"):
        read_checksums(sums)
    sums.write_text(f"# comment\n{'A' * 64} */wmt13/x.tgz\n")
    assert read_checksums(sums) == {"wmt13/x.tgz": "a" * 64}
    with pytest.raises(ConfigError, match="--mirror"):
        Source(None, sums)


def test_mirror_keeps_the_original_path():
    source = Source("http://mirror.example/base/")
    assert source.url("https://www.statmt.org/wmt13/test.tgz") == "http://mirror.example/base/wmt13/test.tgz"
    assert Source().url("https://www.statmt.org/wmt13/test.tgz") == "https://www.statmt.org/wmt13/test.tgz"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("mirror")
    return root, build(root)


def _download(base: str, sums: Path, out: Path, *extra: str) -> int:
    return main(["download", "--recipe", "wmt14-en-de", "--out-dir", str(out), "--mirror", base,
                 "--checksums", str(sums), "--retries", "0", *extra])  # fmt: skip


def test_recipe_download_from_the_mirror(mirror, tmp_path: Path, monkeypatch):
    root, sums = mirror
    _point_sacrebleu_at(tmp_path / "sacrebleu", monkeypatch)
    with serve(root) as base:
        assert _download(base, sums, tmp_path / "x") == 0
    raw = tmp_path / "x" / "raw"
    en = (raw / "train.en").read_text().splitlines()
    assert len(en) == len((raw / "train.de").read_text().splitlines()) > 2000
    test = eval_pairs()
    assert (raw / "test.de").read_text().splitlines()[QUOTED_TEST_LINE] == test[QUOTED_TEST_LINE][1]
    assert (raw / "valid.en").exists()
    manifest = json.loads((tmp_path / "x" / "orig" / "manifest.json").read_text())
    pins = read_checksums(sums)
    for name in ("training-parallel-europarl-v7.tgz", "training-parallel-commoncrawl.tgz"):
        assert manifest[name]["sha256"] == pins[f"wmt13/{name}"] and manifest[name]["pinned"]
    test_full = manifest["wmt14_full.test-full.tgz"]
    assert (
        test_full["verified_by"] == "mirror sha256"
        and test_full["md5_sacrebleu"] == "a8cd784e006feb32ac6f3d9ec7eb389a"
    )
    assert re.fullmatch(r"[0-9a-f]{32}", test_full["md5"])


@pytest.mark.parametrize(
    ("recipe", "commentary"),
    [("wmt14-en-de", "news-commentary-v12"), ("wmt16-en-de-google", "news-commentary-v11")],
)
def test_each_en_de_recipe_reads_its_news_commentary(recipe, commentary, mirror, tmp_path: Path, monkeypatch):
    """TC's En-De data takes News Commentary v12 (pre-process/wmt14en-de.sh:21,35); the WMT'16 archive
    DLCL trains on, v11 (google/seq2seq bin/data/wmt16_en_de.sh:36-38,62). The mirror serves each
    archive at its original path, and the download checks it against the pinned size and sha256."""
    root, sums = mirror
    _point_sacrebleu_at(tmp_path / "sacrebleu", monkeypatch)
    with serve(root) as base:
        code = main(["download", "--recipe", recipe, "--out-dir", str(tmp_path / "x"), "--mirror", base,
                     "--checksums", str(sums), "--retries", "0"])  # fmt: skip
    assert code == 0
    manifest = json.loads((tmp_path / "x" / "orig" / "manifest.json").read_text())
    (archive,) = [a for a in RECIPES[recipe].archives if "nc-v1" in a.name]
    assert manifest[archive.name]["sha256"] == read_checksums(sums)[url_path(archive.url)]
    assert any(commentary in corpus for corpus in RECIPES[recipe].corpora)
    assert len((tmp_path / "x" / "raw" / "train.de").read_text().splitlines()) > 2000


def _point_sacrebleu_at(cache: Path, monkeypatch) -> None:
    """sacrebleu fixes its cache directory per dataset object at import: move it for this test."""
    from sacrebleu.dataset import DATASETS

    for name in ("wmt14/full", "wmt13"):
        ds = DATASETS[name]
        monkeypatch.setattr(ds, "_outdir", str(cache / ds.name))
        monkeypatch.setattr(ds, "_rawdir", str(cache / ds.name / "raw"))


def test_a_one_byte_change_is_a_sha256_error_naming_the_url(mirror, tmp_path: Path, capsys):
    root, sums = mirror
    bad = tmp_path / "bad"
    for f in root.rglob("*"):
        if f.is_file():
            (bad / f.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
            (bad / f.relative_to(root)).write_bytes(f.read_bytes())
    target = bad / "wmt13" / "training-parallel-commoncrawl.tgz"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    with serve(bad) as base:
        assert _download(base, sums, tmp_path / "x") == 2
    err = capsys.readouterr().err
    expected = read_checksums(sums)["wmt13/training-parallel-commoncrawl.tgz"]
    assert (
        f"{base}/wmt13/training-parallel-commoncrawl.tgz: sha256 mismatch, expected {expected}, got " in err
    )
    assert not (tmp_path / "x" / "orig" / "training-parallel-commoncrawl.tgz").exists()
    # The archive before it was verified and kept: a rerun fetches only what is missing.
    assert (tmp_path / "x" / "orig" / "training-parallel-europarl-v7.tgz").exists()


def test_news_crawl_download_stops_at_max_lines(mirror, tmp_path: Path):
    root, sums = mirror
    out = tmp_path / "mono.fr"
    with serve(root) as base:
        rc = main(["download", "--mono-recipe", "news-crawl-fr", "--out-dir", str(tmp_path / "orig"),
                   "--output", str(out), "--max-lines", "100", "--mirror", base, "--checksums", str(sums)])  # fmt: skip
    assert rc == 0
    assert len(out.read_text().splitlines()) == 100
    manifest = json.loads((tmp_path / "orig" / "manifest.json").read_text())
    assert 1 <= len(manifest) < len(MONO_RECIPES["news-crawl-fr"].archives)  # stopped early


def test_iwslt14_recipe_from_the_mirror_as_prepare_iwslt14(mirror, tmp_path: Path):
    """fairseq's prepare-iwslt14.sh: metadata lines dropped, title/description text kept without the
    tags, the five XML files concatenated in the script's order as test, apostrophes straightened; then
    preprocess lowercases, tokenizes without -a, carves valid every 23rd line."""
    from wmt_mirror import IWSLT_TEST, IWSLT_TRAIN_TALKS

    root, sums = mirror
    out = tmp_path / "iwslt"
    with serve(root) as base:
        assert main(["download", "--recipe", "iwslt14-de-en", "--out-dir", str(out), "--mirror", base,
                     "--checksums", str(sums), "--retries", "0"]) == 0  # fmt: skip
    raw = out / "raw"
    train_de = (raw / "train.de").read_text().splitlines()
    train_en = (raw / "train.en").read_text().splitlines()
    assert len(train_de) == len(train_en) == IWSLT_TRAIN_TALKS * 12  # 10 sentences + title + description
    assert not any(tag in line for line in train_en for tag in ("<url>", "<talkid>", "<keywords>", "<title>"))
    assert "Talk 0 (en)" in train_en and "About talk 0 (en)." in train_en
    test = eval_pairs()[: 2 * len(IWSLT_TEST)]
    assert (raw / "test.en").read_text().splitlines() == [p[0] for p in test]
    test_de = (raw / "test.de").read_text().splitlines()
    assert test_de == [p[1].replace("\u2019", "'") for p in test] and "’" not in "".join(test_de)
    manifest = json.loads((out / "orig" / "manifest.json").read_text())
    assert manifest["de-en.tgz"]["pinned"] is True  # by the mirror's SHA256SUMS

    tok = tmp_path / "tok"
    assert main(["preprocess", "--in-dir", str(raw), "--out-dir", str(tok), "--src", "de", "--tgt", "en",
                 "--max-len", "175", "--valid-every", "23", "--no-normalize", "--no-aggressive",
                 "--lowercase", "--workers", "1"]) == 0  # fmt: skip
    valid = (tok / "valid.en").read_text().splitlines()
    assert 0 < len(valid) <= len(train_en) // 23  # every 23rd pair, then cleaned
    for split in ("train", "valid", "test"):
        text = (tok / f"{split}.en").read_text()
        assert text == text.lower() and "@-@" not in text
    assert json.loads((tok / "meta.json").read_text())["lowercased"] is True
