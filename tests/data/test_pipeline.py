"""preprocess -> learn-bpe/apply-bpe -> binarize on small real text, and bad-input errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pipeline_lib.atomic import is_temp_file
from pipeline_lib.cli import main
from pipeline_lib.data import subword
from pipeline_lib.data.detok import moses_detokenize, postprocess_subwords, restore_text
from pipeline_lib.data.indexed import IndexedDataset, ParallelCorpus
from pipeline_lib.data.integrity import load_meta
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.report.tables import render_data

EN = [
    "Hello, world! This is a well-known test of the tokenizer.",
    'The cat\'s owner paid $3.50 for 2 cans & a box of "premium" food.',
    "Can't we re-use the old state-of-the-art system (v2.1) here?",
    "She said: the results are 95.5% correct, aren't they?",
    "A brand-new, twenty-year-old car drove 100 km.",
]
FR = [
    "Bonjour le monde ! C'est un test bien connu du tokeniseur.",
    "Le propriétaire du chat a payé 3,50 euros pour 2 boîtes & une boîte de nourriture.",
    "Ne peut-on pas réutiliser l'ancien système (v2.1) ici ?",
    "Elle a dit : les résultats sont corrects à 95,5 %, n'est-ce pas ?",
    "Une voiture toute neuve, vieille de vingt ans, a roulé 100 km.",
]


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pipe")
    raw = root / "raw"
    # A small training corpus of real sentences, each pair repeated with a numbered variant so
    # BPE has something to learn; test = the samples themselves.
    train_en = [f"{s} Number {i}." for i in range(40) for s in EN]
    train_fr = [f"{s} Numéro {i}." for i in range(40) for s in FR]
    _write(raw / "train.en", train_en)
    _write(raw / "train.fr", train_fr)
    _write(raw / "valid.en", EN[:2])
    _write(raw / "valid.fr", FR[:2])
    _write(raw / "test.en", EN)
    _write(raw / "test.fr", FR)
    assert (
        main(
            [
                "preprocess",
                "--in-dir",
                str(raw),
                "--out-dir",
                str(root / "tok"),
                "--src",
                "en",
                "--tgt",
                "fr",
                "--workers",
                "2",
                "--chunk-size",
                "7",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "learn-bpe",
                "--in-dir",
                str(root / "tok"),
                "--src",
                "en",
                "--tgt",
                "fr",
                "--model-dir",
                str(root / "sw"),
                "--merges",
                "150",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "apply-bpe",
                "--in-dir",
                str(root / "tok"),
                "--model-dir",
                str(root / "sw"),
                "--out-dir",
                str(root / "bpe"),
                "--src",
                "en",
                "--tgt",
                "fr",
                "--workers",
                "2",
                "--chunk-size",
                "13",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "binarize",
                "--in-dir",
                str(root / "bpe"),
                "--out-dir",
                str(root / "bin"),
                "--src",
                "en",
                "--tgt",
                "fr",
            ]
        )
        == 0
    )
    return root


def test_tokenize_bpe_detokenize_roundtrip(corpus: Path) -> None:
    tok = _read(corpus / "tok" / "test.en")
    assert "well @-@ known" in tok[0]  # tokenizer -a
    assert "&amp;" in tok[1]  # Moses escaping
    meta = json.loads((corpus / "bpe" / "meta.json").read_text())
    assert meta["subword"] == "bpe" and meta["moses_tokenized"] is True
    for lang, originals in (("en", EN), ("fr", FR)):
        bpe = _read(corpus / "bpe" / f"test.{lang}")
        assert any("@@ " in line for line in bpe), "BPE should split some rare words"
        assert [postprocess_subwords(b, "bpe") for b in bpe] == _read(corpus / "tok" / f"test.{lang}")
        assert restore_text(bpe, "bpe", True, lang) == originals


def test_parallel_apply_equals_single_process(corpus: Path, tmp_path: Path) -> None:
    assert (
        main(
            [
                "apply-bpe",
                "--in-dir",
                str(corpus / "tok"),
                "--model-dir",
                str(corpus / "sw"),
                "--out-dir",
                str(tmp_path),
                "--src",
                "en",
                "--tgt",
                "fr",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    for split in ("train", "test"):
        assert (tmp_path / f"{split}.fr").read_bytes() == (corpus / "bpe" / f"{split}.fr").read_bytes()


def test_binarized_ids_decode_to_bpe_text(corpus: Path) -> None:
    bin_dir = corpus / "bin"
    vocab = Vocabulary.load(bin_dir / "vocab.txt")
    meta = load_meta(bin_dir)
    assert meta["vocab_sha256"] == vocab.sha256()
    assert meta["subword"] == "bpe" and meta["moses_tokenized"] is True
    assert (bin_dir / meta["subword_model"]).is_file()
    for split in ("train", "valid", "test"):
        pc = ParallelCorpus(bin_dir, split, "en", "fr")
        assert meta["splits"][split]["pairs"] == len(pc)
        for lang, ds in (("en", pc.src), ("fr", pc.tgt)):
            lines = _read(corpus / "bpe" / f"{split}.{lang}")
            assert [vocab.string(ds[i]) for i in range(len(ds))] == lines
            assert list(ds.sizes) == [len(line.split()) for line in lines]
    assert meta["splits"]["train"]["en_unk"] == 0  # the vocabulary is built from train


def test_sentencepiece_alternative(corpus: Path, tmp_path: Path) -> None:
    raw = tmp_path / "norm"
    assert (
        main(
            [
                "preprocess",
                "--in-dir",
                str(corpus / "raw"),
                "--out-dir",
                str(raw),
                "--src",
                "en",
                "--tgt",
                "fr",
                "--no-tokenize",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    for kind in ("unigram", "bpe"):
        sw, out = tmp_path / f"sw-{kind}", tmp_path / f"spm-{kind}"
        assert (
            main(
                [
                    "learn-bpe",
                    "--in-dir",
                    str(raw),
                    "--src",
                    "en",
                    "--tgt",
                    "fr",
                    "--model-dir",
                    str(sw),
                    "--kind",
                    "spm",
                    "--spm-type",
                    kind,
                    "--vocab-size",
                    "90",
                    "--workers",
                    "1",
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "apply-bpe",
                    "--in-dir",
                    str(raw),
                    "--model-dir",
                    str(sw),
                    "--out-dir",
                    str(out),
                    "--src",
                    "en",
                    "--tgt",
                    "fr",
                    "--workers",
                    "2",
                ]
            )
            == 0
        )
        meta = json.loads((out / "meta.json").read_text())
        assert meta["subword"] == "spm" and meta["moses_tokenized"] is False
        pieces = _read(out / "test.fr")
        assert "\u2581" in pieces[0]
        assert restore_text(pieces, "spm", False, "fr") == _read(raw / "test.fr")


def test_monolingual_binarize(corpus: Path, tmp_path: Path) -> None:
    assert (
        main(
            [
                "binarize",
                "--in-dir",
                str(corpus / "bpe"),
                "--out-dir",
                str(tmp_path),
                "--src",
                "fr",
                "--splits",
                "test",
                "--vocab",
                str(corpus / "bin" / "vocab.txt"),
            ]
        )
        == 0
    )
    ds = IndexedDataset(tmp_path / "test.fr")
    assert len(ds) == len(FR)
    assert not (tmp_path / "test.en.ids.npy").exists()
    assert load_meta(tmp_path)["tgt_lang"] is None
    assert (tmp_path / "vocab.txt").read_bytes() == (corpus / "bin" / "vocab.txt").read_bytes()


def test_detok_helpers() -> None:
    assert postprocess_subwords("un@@ believ@@ able re@@ sults", "bpe") == "unbelievable results"
    assert postprocess_subwords("\u2581Hello \u2581wor ld", "spm") == "Hello world"
    assert moses_detokenize(["it &apos;s a well @-@ known fact ."], "en") == ["it's a well-known fact."]


# -- bad input ---------------------------------------------------------------------------------
def _pp(raw: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "preprocess",
            "--in-dir",
            str(raw),
            "--out-dir",
            str(out),
            "--src",
            "en",
            "--tgt",
            "fr",
            "--splits",
            "train",
            "--workers",
            "1",
            *extra,
        ]
    )


def test_line_count_mismatch_names_file_and_line(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "raw" / "train.en", ["a b", "c d", "e f"])
    _write(tmp_path / "raw" / "train.fr", ["a b", "c d"])
    assert _pp(tmp_path / "raw", tmp_path / "tok") == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'raw' / 'train.en'}:3: line-count mismatch" in err
    assert not (tmp_path / "tok").exists() or not any((tmp_path / "tok").iterdir())


def test_invalid_utf8_names_file_and_line(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "raw" / "train.en", ["good line", "another", "third"])
    (tmp_path / "raw" / "train.fr").write_bytes(b"bonne ligne\nencore\ntroisi\xe8me\n")
    assert _pp(tmp_path / "raw", tmp_path / "tok") == 2
    assert f"{tmp_path / 'raw' / 'train.fr'}:3: invalid UTF-8 (byte 0xe8" in capsys.readouterr().err


def test_empty_after_cleaning_keeps_previous_output(tmp_path: Path, capsys) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    _write(raw / "train.en", ["one two three", "four five six"])
    _write(raw / "train.fr", ["un deux trois", "quatre cinq six"])
    assert _pp(raw, tok) == 0
    before = (tok / "train.en").read_bytes()
    # Every pair now has a 1:4 length ratio.
    _write(raw / "train.en", ["one", "two"])
    _write(raw / "train.fr", ["un deux trois quatre", "cinq six sept huit"])
    assert _pp(raw, tok) == 2
    err = capsys.readouterr().err
    assert "empty after cleaning" in err and "ratio=2" in err and "train.en" in err
    assert (tok / "train.en").read_bytes() == before
    assert not [p for p in tok.iterdir() if is_temp_file(p)]


def test_huge_lines_cleaned_and_counted(tmp_path: Path) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    huge = " ".join(["word"] * 12_000)
    _write(raw / "train.en", ["a short line", huge, "another short line", "x " * 300])
    _write(raw / "train.fr", ["une ligne courte", "une autre", "une autre ligne courte", "y " * 300])
    assert _pp(raw, tok, "--dedup") == 0
    assert _read(tok / "train.en") == ["a short line", "another short line"]
    removed = json.loads((tok / "meta.json").read_text())["splits"]["train"]["removed"]
    assert removed == {"over_hard_limit": 1, "too_long": 1}


def test_dedup_and_clean_counts(tmp_path: Path) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    _write(raw / "train.en", ["the same line", "the same line", "", "other text here"])
    _write(raw / "train.fr", ["la même ligne", "la même ligne", "vide", "autre texte ici"])
    assert _pp(raw, tok, "--dedup") == 0
    assert _read(tok / "train.fr") == ["la même ligne", "autre texte ici"]
    removed = json.loads((tok / "meta.json").read_text())["splits"]["train"]["removed"]
    assert removed == {"duplicate": 1, "empty": 1}


def test_eval_splits_keep_references_of_surviving_pairs(tmp_path: Path) -> None:
    """Scoring a cleaned valid split needs the original text of exactly the pairs that survived."""
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    _write(raw / "train.en", ["a b c", "d e f", "g h i"])
    _write(raw / "train.fr", ["a b c", "d e f", "g h i"])
    _write(raw / "valid.en", ["It's one.", "two", "Three, four."])
    _write(raw / "valid.fr", ["C'est un.", "deux trois quatre cinq six", "Trois, quatre."])
    assert _pp(raw, tok, "--splits", "train", "valid") == 0
    assert len(_read(tok / "valid.en")) == 2  # the 1:5 pair is cleaned away
    assert _read(tok / "valid.ref.en") == ["It's one.", "Three, four."]
    assert _read(tok / "valid.ref.fr") == ["C'est un.", "Trois, quatre."]
    assert not (tok / "train.ref.en").exists()  # train is never a reference; no copy of it


def test_valid_carved_from_train_has_references(tmp_path: Path) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    lines = [f"line number {i}" for i in range(1, 10)]
    _write(raw / "train.en", lines)
    _write(raw / "train.fr", [f"ligne {i}" for i in range(1, 10)])
    assert _pp(raw, tok, "--splits", "train", "valid", "--valid-every", "3") == 0
    assert _read(tok / "valid.ref.en") == ["line number 3", "line number 6", "line number 9"]
    assert _read(tok / "valid.ref.fr") == ["ligne 3", "ligne 6", "ligne 9"]
    assert len(_read(tok / "train.en")) == 6


def test_cleaning_more_than_a_fifth_is_warned_in_log_meta_and_report(tmp_path: Path, caplog) -> None:
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    # 10 pairs: 3 fail the 1.5 length ratio (30% > 20%)
    _write(raw / "train.en", ["a b c"] * 7 + ["one"] * 3)
    _write(raw / "train.fr", ["x y z"] * 7 + ["un deux trois quatre"] * 3)
    with caplog.at_level("WARNING"):
        assert _pp(raw, tok) == 0
    meta = json.loads((tok / "meta.json").read_text())["splits"]["train"]
    assert meta["warning"].startswith(
        "cleaning removed 3 of 10 train pairs (30%, more than 20%), most by ratio (3)"
    )
    assert meta["warning"] in caplog.text
    data = render_data({"mine": str(tok / "meta.json")})
    assert "| mine | train | 10 | 7 | 3 (30%) | ratio 3 |" in data
    assert f"- **Warning** (mine): {meta['warning']}." in data
    # 2 of 10 (20%) is not over the share: no warning
    _write(raw / "train.en", ["a b c"] * 8 + ["one"] * 2)
    _write(raw / "train.fr", ["x y z"] * 8 + ["un deux trois quatre"] * 2)
    assert _pp(raw, tok) == 0
    assert "warning" not in json.loads((tok / "meta.json").read_text())["splits"]["train"]


def test_learned_vocabularies_count_the_segmented_training_text(corpus: Path) -> None:
    # learn-bpe segments each word type once, weighted by its count; this must equal counting
    # the segmented text line by line (what apply-bpe then produces).
    for lang in ("en", "fr"):
        expected: Counter[str] = Counter()
        for line in _read(corpus / "bpe" / f"train.{lang}"):
            expected.update(line.split())
        learned = {}
        for row in _read(corpus / "sw" / f"vocab.{lang}"):
            token, count = row.rsplit(" ", 1)
            learned[token] = int(count)
        assert learned == dict(expected)


def test_bounded_bpe_cache_gives_the_same_segmentation(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(subword, "BPE_CACHE_WORDS", 3)  # cleared every few words
    out = tmp_path / "train.fr"
    subword.segment_file(corpus / "tok" / "train.fr", out, kind="bpe", model_path=corpus / "sw" / "codes")
    assert out.read_bytes() == (corpus / "bpe" / "train.fr").read_bytes()


def test_parallel_binarize_equals_single_process(corpus: Path, tmp_path: Path) -> None:
    argv = ["binarize", "--in-dir", str(corpus / "bpe"), "--src", "en", "--tgt", "fr"]
    assert main([*argv, "--out-dir", str(tmp_path / "one"), "--workers", "1"]) == 0
    assert main([*argv, "--out-dir", str(tmp_path / "two"), "--workers", "2", "--chunk-size", "7"]) == 0
    for name in ("vocab.txt", "train.fr.ids.npy", "train.fr.offsets.npy", "test.en.ids.npy"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
        assert (tmp_path / "two" / name).read_bytes() == (corpus / "bin" / name).read_bytes()


def _learn(tok: Path, model_dir: Path, *extra: str) -> int:
    argv = ["learn-bpe", "--in-dir", str(tok), "--src", "en", "--tgt", "fr", "--model-dir", str(model_dir)]
    return main([*argv, "--merges", "150", "--workers", "1", *extra])


def test_bpe_sample_keeps_aligned_pairs_seeded_and_about_the_asked_size(tmp_path: Path) -> None:
    from pipeline_lib.data.line_sample import write_sample

    n = 20_000
    _write(tmp_path / "a", [f"s{i}" for i in range(n)])
    _write(tmp_path / "b", [f"t{i}" for i in range(n)])
    samples = {}
    for seed in (1, 1, 2):
        outs = [tmp_path / f"a.{seed}", tmp_path / f"b.{seed}"]
        kept, total = write_sample([tmp_path / "a", tmp_path / "b"], outs, 5_000, seed)
        src, tgt = _read(outs[0]), _read(outs[1])
        assert total == n and kept == len(src) == len(tgt)
        assert [s[1:] for s in src] == [t[1:] for t in tgt]  # the same pairs on both sides
        assert abs(kept - 5_000) < 4 * (n * 0.25 * 0.75) ** 0.5  # binomial(n, 1/4): 4 sigma
        samples.setdefault(seed, []).append(src)
    assert samples[1][0] == samples[1][1] and samples[1][0] != samples[2][0]


def test_learn_bpe_on_a_sample(corpus: Path, tmp_path: Path) -> None:
    # a "sample" as large as the corpus keeps every line: the codes of the whole text, exactly
    assert _learn(corpus / "tok", tmp_path / "all", "--sample-lines", "1000000") == 0
    assert (tmp_path / "all" / "codes").read_bytes() == (corpus / "sw" / "codes").read_bytes()
    assert (tmp_path / "all" / "vocab.fr").read_bytes() == (corpus / "sw" / "vocab.fr").read_bytes()
    # half of it: counts scaled back to the corpus (200 lines), the sample recorded, no temp files left
    assert _learn(corpus / "tok", tmp_path / "half", "--sample-lines", "100", "--sample-seed", "3") == 0
    meta = json.loads((tmp_path / "half" / "subword.json").read_text())
    assert meta["of_lines"] == 200 and 60 < meta["sample_lines"] < 140 and meta["sample_seed"] == 3
    full = dict(row.rsplit(" ", 1) for row in _read(corpus / "sw" / "vocab.en"))
    half = dict(row.rsplit(" ", 1) for row in _read(tmp_path / "half" / "vocab.en"))
    assert full["Number"] == half["Number"] == "200"  # once in every line: scaled back exactly
    assert sorted(p.name for p in (tmp_path / "half").iterdir()) == [
        "codes",
        "subword.json",
        "vocab.en",
        "vocab.fr",
    ]


def test_learn_bpe_sample_names_misaligned_sides(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "tok" / "train.en", ["a b"] * 5)
    _write(tmp_path / "tok" / "train.fr", ["c d"] * 4)
    assert _learn(tmp_path / "tok", tmp_path / "sw", "--sample-lines", "3") == 2
    err = capsys.readouterr().err
    assert "train.en: 5" in err and "train.fr: 4" in err


def test_raw_text_is_prepared_as_the_data_stage_prepared_the_test_source(corpus: Path) -> None:
    from pipeline_lib.data.raw_text import SourcePreparer, text_recipe
    from pipeline_lib.errors import ConfigError

    recipe = text_recipe(corpus / "bin", corpus / "tok" / "meta.json")
    assert recipe.tokenization.straighten_apostrophes and not recipe.tokenization.normalize  # the test branch
    assert SourcePreparer(recipe)(EN) == _read(corpus / "bpe" / "test.en")
    with pytest.raises(ConfigError, match="tok-test/meta.json: not found.*--text-meta"):
        text_recipe(corpus / "bin")  # not the workflow's layout: the record must be named
