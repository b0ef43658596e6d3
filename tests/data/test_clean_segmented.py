"""``clean_after: bpe``: clean-corpus-n on the subword-segmented train and valid, as fairseq's
prepare-wmt14en2fr.sh:121-132 does (apply_bpe to train/valid/test, then ``clean-corpus-n.perl -ratio
1.5 bpe.train ... 1 250`` and the same for valid; test never cleaned).

A tiny corpus where segmenting changes the verdict both ways runs through the real stages
(preprocess, learn-bpe, apply-bpe). The kept lines are checked against a clean-corpus-n written
here from the perl script, run on the same segmented text apply-bpe writes without cleaning.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.cli import EXIT_USAGE, main
from pipeline_lib.data.clean_segmented import SplitPaths, clean_split, pair_reason, segment_and_clean
from pipeline_lib.data.moses import CleanConfig
from pipeline_lib.errors import InputError
from pipeline_lib.report.tables import render_data
from pipeline_lib.workflow import Commands
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.rules import ReportRules

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LIMITS = ["--ratio", "1.5", "--min-len", "1", "--max-len", "6"]
FILLER = ("the cat sat on the mat", "le chat est sur le tapis")  # frequent: whole words after BPE
# Rare words (each letter pair seen once) stay split into characters: 1 token, len(word) subwords.
TRAIN = [
    ("the cat", "le qxzv"),  # 1: tokens 2/2; subwords 2/5 -> ratio (target longer)
    ("the wkpgy", "le chat"),  # 2: tokens 2/2; subwords 6/2 -> ratio (source longer)
    ("the cat sat", "le chat bqwfhd"),  # 3: tokens 3/3; subwords 3/8 -> too_long
    ("the cat sat", "fjq"),  # 4: tokens 3/1 -> ratio; subwords 3/3 -> kept
    ("the", "le chat est sur"),  # 5: ratio either way
    (" ".join(["the"] * 9), "le"),  # over --hard-limit 8: dropped by preprocess in both modes
    ("the cat", ""),  # empty: dropped by preprocess in both modes
    *[FILLER] * 20,
]
VALID = [
    ("the cat sat", "le chat est"),  # kept
    ("the cat", "le qxzv"),  # dropped after BPE (ratio)
    ("on the mat.", "sur le tapis."),  # kept; its tokenized text differs from the original
]
TEST = [("the", "le chat est sur"), ("the cat", "le chat")]  # never cleaned


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def clean_corpus_n(src: list[str], tgt: list[str], ratio: float, lo: int, hi: int) -> list[int]:
    """The 1-based lines clean-corpus-n.perl keeps (its lines 109-131; no factors, no -lc)."""
    kept = []
    for n, (f, e) in enumerate(zip(src, tgt, strict=True), 1):
        f, e = (re.sub(r"^ | $", "", re.sub(r"\s+", " ", x.replace("|", ""))) for x in (f, e))
        if f == "" or e == "":
            continue
        fc, ec = len(f.split(" ")), len(e.split(" "))
        if ec > hi or fc > hi or ec < lo or fc < lo or ec / fc > ratio or fc / ec > ratio:
            continue
        if re.search(r"[^\s|]{1001}", e) or re.search(r"[^\s|]{1001}", f):
            continue
        kept.append(n)
    return kept


def _stages(tmp: Path, after: str) -> Path:
    """raw -> tok -> subword -> bpe (cleaned as ``after`` says) and bpe-plain (segmented, uncleaned)."""
    raw = tmp / "raw"
    for split, pairs in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        _write(raw / f"{split}.en", [s for s, _ in pairs])
        _write(raw / f"{split}.fr", [t for _, t in pairs])
    langs = ["--src", "en", "--tgt", "fr", "--workers", "1"]
    pre = ["preprocess", "--in-dir", str(raw), "--out-dir", str(tmp / "tok"), "--hard-limit", "8", *langs]
    assert main([*pre, *(["--clean-after", "bpe"] if after == "bpe" else LIMITS)]) == 0
    model = ["--model-dir", str(tmp / "subword")]
    assert main(["learn-bpe", "--in-dir", str(tmp / "tok"), *model, "--merges", "100", *langs]) == 0
    apply = ["apply-bpe", "--in-dir", str(tmp / "tok"), *model, *langs]
    assert main([*apply, "--out-dir", str(tmp / "bpe-plain")]) == 0
    cleaning = ["--clean-splits", "train", "valid", *LIMITS] if after == "bpe" else []
    assert main([*apply, "--out-dir", str(tmp / "bpe"), *cleaning]) == 0
    return tmp


@pytest.fixture(scope="module")
def after_bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _stages(tmp_path_factory.mktemp("after_bpe"), "bpe")


def test_kept_pairs_are_clean_corpus_n_on_the_subwords(after_bpe: Path) -> None:
    plain, bpe = after_bpe / "bpe-plain", after_bpe / "bpe"
    for split in ("train", "valid"):
        src, tgt = _lines(plain / f"{split}.en"), _lines(plain / f"{split}.fr")
        kept = clean_corpus_n(src, tgt, 1.5, 1, 6)
        assert _lines(bpe / f"{split}.en") == [src[n - 1] for n in kept], split
        assert _lines(bpe / f"{split}.fr") == [tgt[n - 1] for n in kept], split
    # the corpus exercises the difference: tokens 2/2 dropped, 3/1 kept (now train lines 1-5)
    kept_train = clean_corpus_n(_lines(plain / "train.en"), _lines(plain / "train.fr"), 1.5, 1, 6)
    assert kept_train[:1] == [4], kept_train
    # test is segmented, never cleaned
    assert len(_lines(bpe / "test.en")) == len(TEST) and not (bpe / "test.dropped.tsv").exists()


def test_preprocess_only_drops_what_no_segmentation_can_keep(after_bpe: Path) -> None:
    meta = json.loads((after_bpe / "tok" / "meta.json").read_text(encoding="utf-8"))
    assert meta["clean"]["after"] == "bpe"
    assert meta["splits"]["train"]["removed"] == {"empty": 1, "over_hard_limit": 1}
    assert meta["splits"]["valid"]["removed"] == {}
    assert _lines(after_bpe / "tok" / "train.fr")[:5] == [t for _, t in TRAIN[:5]]


def test_dropped_list_and_meta_in_preprocess_shape(after_bpe: Path) -> None:
    plain, bpe = after_bpe / "bpe-plain", after_bpe / "bpe"
    src, tgt = _lines(plain / "train.en"), _lines(plain / "train.fr")
    reasons = [(1, "ratio"), (2, "ratio"), (3, "too_long"), (5, "ratio")]
    assert _lines(bpe / "train.dropped.tsv") == [
        "line\treason\tsource\ttarget",
        *(f"{n}\t{why}\t{src[n - 1]}\t{tgt[n - 1]}" for n, why in reasons),
    ]
    meta = json.loads((bpe / "meta.json").read_text(encoding="utf-8"))
    assert meta["clean"] == {"splits": ["train", "valid"], "ratio": 1.5, "min_len": 1, "max_len": 6}
    n_train = len(TRAIN) - 2
    assert meta["splits"]["train"] == {
        "input": n_train,
        "kept": n_train - 4,
        "removed": {"ratio": 3, "too_long": 1},
        "dropped_file": "train.dropped.tsv",
    }
    assert meta["splits"]["valid"]["removed"] == {"ratio": 1}
    assert meta["lines"]["train.en"] == n_train - 4
    table = "\n".join(render_data({"d": [str(after_bpe / "tok" / "meta.json"), str(bpe / "meta.json")]}))
    assert f"| d | train (after BPE) | {n_train} | {n_train - 4} | 4 (" in table
    assert "| d | train | 27 | 25 | 2 (7%) | empty 1, over_hard_limit 1 |" in table


def test_valid_references_stay_aligned_and_score_100(after_bpe: Path) -> None:
    bpe, tok = after_bpe / "bpe", after_bpe / "tok"
    kept = [VALID[0], VALID[2]]
    assert _lines(bpe / "valid.ref.fr") == [t for _, t in kept]
    assert _lines(bpe / "valid.ref.en") == [s for s, _ in kept]
    # the tokenized copy is the segmented text with the joins undone
    assert _lines(bpe / "valid.tok.fr") == [x.replace("@@ ", "") for x in _lines(bpe / "valid.fr")]
    assert _lines(bpe / "valid.tok.fr") != _lines(bpe / "valid.ref.fr")
    assert len(_lines(tok / "valid.fr")) == len(VALID)  # preprocess's copy still has every line
    out = after_bpe / "score.json"
    ref = ["--ref", str(bpe / "valid.ref.fr"), "--ref-tok", str(bpe / "valid.tok.fr")]
    meta = ["--ref-tok-meta", str(bpe / "meta.json"), "--moses-lang", "fr", "--lang", "fr"]
    hyp = ["--hyp", str(bpe / "valid.ref.fr"), "--metrics", "tok_bleu_retok"]
    assert main(["score", *hyp, *ref, *meta, "--output", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["scores"]["tok_bleu_retok"]["score"] == pytest.approx(
        100.0
    )


def test_tokenize_mode_keeps_todays_verdicts(tmp_path: Path) -> None:
    _stages(tmp_path, "tokenize")
    tok = tmp_path / "tok"
    reasons = [line.split("\t")[:2] for line in _lines(tok / "train.dropped.tsv")[1:]]
    assert reasons == [["4", "ratio"], ["5", "ratio"], ["6", "over_hard_limit"], ["7", "empty"]]
    assert not (tmp_path / "bpe" / "train.dropped.tsv").exists()
    assert not (tmp_path / "bpe" / "valid.ref.fr").exists()


def test_a_split_emptied_by_cleaning_names_its_file(after_bpe: Path, tmp_path: Path, capsys) -> None:
    apply = ["apply-bpe", "--in-dir", str(after_bpe / "tok"), "--model-dir", str(after_bpe / "subword")]
    args = [*apply, "--out-dir", str(tmp_path / "bpe"), "--src", "en", "--tgt", "fr", "--workers", "1"]
    assert main([*args, "--clean-splits", "valid", "--max-len", "1"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{after_bpe}/tok/valid.en: split 'valid' is empty after cleaning" in err, err
    assert sorted(p.name for p in (tmp_path / "bpe").iterdir()) == []  # nothing written, no scratch left


def _shell_commands(dry_run: str, rule: str) -> list[str]:
    """The shell commands a `snakemake -n -p` prints for ``rule``'s jobs (not crossing into the next job)."""
    return re.findall(rf"^rule {rule}:\n(?:(?!rule ).*\n)*?Shell command: (.*)$", dry_run, re.M)


def test_enfr_dry_run_cleans_in_apply_bpe_only() -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["snakemake", "-n", "-p", "all", "--configfile", "config.wmt14_en_fr.yaml"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    (pre,) = _shell_commands(out, "preprocess")
    assert "--out-dir work/data/wmt14_en_fr/tok " in pre, pre
    assert "--clean-after bpe" in pre and "--ratio" not in pre and "--max-len" not in pre
    (apply,) = _shell_commands(out, "apply_bpe")
    assert "--clean-splits train valid --ratio 1.5 --min-len 1 --max-len 250" in apply, apply
    (apply_test,) = _shell_commands(out, "apply_bpe_test")
    assert "--clean-splits" not in apply_test


def test_valid_evaluation_reads_the_bpe_stage_copies(tmp_path: Path, monkeypatch) -> None:
    cfg = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text(encoding="utf-8"))
    cfg["evaluation"]["split"] = "valid"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    monkeypatch.chdir(REPO)
    plan = check([path], REPO)
    name = "enfr_6L6L_default"
    bpe = plan.data_dir("wmt14_en_fr", "bpe")
    score = Commands(plan).score(name, "valid")
    assert f"--ref {bpe}/valid.ref.fr" in score
    assert f"--ref-tok {bpe}/valid.tok.fr --ref-tok-meta {bpe}/meta.json" in score
    assert plan.ref_marker("wmt14_en_fr", "valid") == f"{bpe}/meta.json"
    # test is never cleaned: its references stay preprocess's
    assert f"{plan.data_dir('wmt14_en_fr', 'tok-test')}/test.ref.fr" in Commands(plan).score(name, "test")
    assert ReportRules(plan).spec()["data"]["wmt14_en_fr"][-1] == f"{bpe}/meta.json"


def test_sentencepiece_pieces_are_cleaned_alike(tmp_path: Path) -> None:
    """SentencePiece datasets (preprocess --no-tokenize) clean on pieces, through the same code."""
    raw, tok = tmp_path / "raw", tmp_path / "tok"
    for split, pairs in (("train", TRAIN), ("valid", VALID)):
        _write(raw / f"{split}.en", [s for s, _ in pairs])
        _write(raw / f"{split}.fr", [t for _, t in pairs])
    langs = ["--src", "en", "--tgt", "fr", "--workers", "1"]
    pre = ["preprocess", "--in-dir", str(raw), "--out-dir", str(tok), "--splits", "train", "valid"]
    assert main([*pre, "--no-tokenize", "--clean-after", "bpe", *langs]) == 0
    model = ["--model-dir", str(tmp_path / "spm")]
    spm = ["--kind", "spm", "--vocab-size", "36", "--spm-type", "bpe"]  # tiny: many pieces per word
    assert main(["learn-bpe", "--in-dir", str(tok), *model, *spm, *langs]) == 0
    apply = ["apply-bpe", "--in-dir", str(tok), *model, *langs]
    assert main([*apply, "--out-dir", str(tmp_path / "plain")]) == 0
    cleaning = ["--clean-splits", "train", "valid", "--ratio", "3", "--max-len", "12"]
    assert main([*apply, "--out-dir", str(tmp_path / "bpe"), *cleaning]) == 0
    for split in ("train", "valid"):
        src, tgt = _lines(tmp_path / "plain" / f"{split}.en"), _lines(tmp_path / "plain" / f"{split}.fr")
        kept = clean_corpus_n(src, tgt, 3, 1, 12)
        assert len(kept) < len(src), split  # no side has 12 words: the pieces drop these
        assert _lines(tmp_path / "bpe" / f"{split}.fr") == [tgt[n - 1] for n in kept], split
        assert _lines(tmp_path / "bpe" / f"{split}.en") == [src[n - 1] for n in kept], split


# -- In-process checks (make mutate MODULE=clean_segmented, docs/mutation.md) ---------------------------
# The stages above run once in a module-scoped fixture, so mutmut links clean_split to the first test
# that uses it only: the dropped list, the counts and the references were checked by tests it never
# ran per mutant. These call the module on hand-made segmented text. Oracles: clean_corpus_n above
# (the perl script's rules) for what is kept; line numbers, counts and messages written out by hand.

CLEAN_LOG = "pipeline_lib.data.clean_segmented"
LIMITS_CFG = CleanConfig(ratio=1.5, min_len=1, max_len=6)
WARNING_TAIL = "check --ratio/--min-len/--max-len and that the two sides are aligned"


def test_a_piece_over_1000_characters_drops_the_pair_as_long_word() -> None:
    cfg = CleanConfig(ratio=9, min_len=1, max_len=250)
    long, limit = "x" * 1001, "x" * 1000
    pairs = [(f"a {long}", "b c"), ("a b", f"{long} c"), (f"a {limit}", f"b {limit}")]
    perl = [clean_corpus_n([src], [tgt], 9, 1, 250) for src, tgt in pairs]
    assert perl == [[], [], [1]]  # the perl script: over 1,000 characters drops, 1,000 keeps
    assert [pair_reason(src, tgt, cfg) for src, tgt in pairs] == ["long_word", "long_word", None]
    # a count reason comes first, as in preprocess's list
    assert pair_reason(long, "a b c", CleanConfig(ratio=1.5)) == "ratio"


def _segmented(tmp_path: Path, src: list[str], tgt: list[str], comp: list[str]) -> tuple[Path, Path, Path]:
    paths = tmp_path / "seg.en", tmp_path / "seg.fr", tmp_path / "tok.en"
    for path, lines in zip(paths, (src, tgt, comp), strict=True):
        _write(path, lines)
    return paths


def test_clean_split_lists_counts_and_copies_the_kept_lines(tmp_path: Path) -> None:
    rows = [
        ("a b", "c d"),  # 1 kept
        ("a\tb c d", "e"),  # 2 ratio 4/1 (a tab is a separator; escaped in the list)
        ("a", ""),  # 3 empty
        ("a b c", "d e f g h i j"),  # 4 too_long (7 > 6)
        ("k l m", "n o p"),  # 5 kept
        ("q r", "s t u v w"),  # 6 ratio 5/2
    ]
    src, tgt = [s for s, _ in rows], [t for _, t in rows]
    comp = [f"tok {n}" for n in range(1, 7)]
    seg_en, seg_fr, tok_en = _segmented(tmp_path, src, tgt, comp)
    assert clean_corpus_n(src, tgt, 1.5, 1, 6) == [1, 5]
    out = tmp_path / "out.en", tmp_path / "out.fr"
    stats = clean_split(
        "train",
        (seg_en, seg_fr),
        out,
        tmp_path / "dropped.tsv",
        LIMITS_CFG,
        [(tok_en, tmp_path / "out.tok.en")],
    )
    assert out[0].read_bytes() == b"a b\nk l m\n"
    assert out[1].read_bytes() == b"c d\nn o p\n"
    assert (tmp_path / "out.tok.en").read_bytes() == b"tok 1\ntok 5\n"
    assert (tmp_path / "dropped.tsv").read_text(encoding="utf-8") == (
        "line\treason\tsource\ttarget\n"
        "2\tratio\ta\\tb c d\te\n"
        "3\tempty\ta\t\n"
        "4\ttoo_long\ta b c\td e f g h i j\n"
        "6\tratio\tq r\ts t u v w\n"
    )
    assert stats == {
        "input": 6,
        "kept": 2,
        "removed": {"empty": 1, "ratio": 2, "too_long": 1},
        "warning": "cleaning removed 4 of 6 train (after BPE) pairs (67%, more than 20%), most by ratio (2): "
        + WARNING_TAIL,
    }


def test_clean_split_without_drops_has_no_warning(tmp_path: Path) -> None:
    seg_en, seg_fr, _ = _segmented(tmp_path, ["a b"], ["c d e"], [])
    out = tmp_path / "out.en", tmp_path / "out.fr"
    stats = clean_split("valid", (seg_en, seg_fr), out, tmp_path / "dropped.tsv", LIMITS_CFG)
    assert stats == {"input": 1, "kept": 1, "removed": {}}
    assert (tmp_path / "dropped.tsv").read_text(encoding="utf-8") == "line\treason\tsource\ttarget\n"


@pytest.mark.parametrize(
    ("lengths", "short", "longer"),
    [((2, 2, 1), 2, 0), ((2, 1, 2), 1, 0), ((1, 2, 2), 0, 1)],
    ids=["companion-short", "target-short", "source-short"],
)
def test_a_file_ending_early_names_itself_the_line_and_a_longer_file(
    tmp_path: Path, lengths: tuple[int, int, int], short: int, longer: int
) -> None:
    files = _segmented(tmp_path, *(["a b", "c d"][:n] for n in lengths))
    with pytest.raises(InputError) as err:
        clean_split("valid", files[:2], (tmp_path / "o.en", tmp_path / "o.fr"), tmp_path / "d.tsv",
                    LIMITS_CFG, [(files[2], tmp_path / "o.tok.en")])  # fmt: skip
    assert str(err.value) == (
        f"{files[short]}:2: line-count mismatch, {files[short]} ends after 1 lines but {files[longer]} continues"
    )


def _split_dirs(tmp_path: Path, split: str, tok: dict[str, list[str]], seg: dict[str, list[str]]):
    """in_dir with the tokenized split and its references (upper-cased copies), and a ``segment`` that
    writes ``seg``; returns the paths and the segment calls seen."""
    in_dir = tmp_path / "tok"
    for lang, lines in tok.items():
        _write(in_dir / f"{split}.{lang}", lines)
        _write(in_dir / f"{split}.ref.{lang}", [line.upper() for line in lines])
    calls: list[tuple[str, str, Path]] = []

    def segment(split_: str, lang: str, dst: Path) -> None:
        calls.append((split_, lang, dst))
        _write(dst, seg[lang])

    paths = SplitPaths(in_dir, tmp_path / "bpe", tmp_path / "scratch", ("en", "fr"))
    return paths, segment, calls


def _records(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == CLEAN_LOG]


def test_an_evaluation_split_filters_its_tokenized_text_and_references_alike(tmp_path: Path, caplog) -> None:
    tok = {"en": ["the cat", "the wkpgy", "on the mat ."], "fr": ["le chat", "le chat", "sur le tapis ."]}
    seg = {"en": ["the cat", "the w@@ k@@ p@@ g@@ y", "on the mat ."], "fr": tok["fr"]}
    paths, segment, calls = _split_dirs(tmp_path, "valid", tok, seg)
    with caplog.at_level(logging.INFO, logger=CLEAN_LOG), AtomicGroup() as group:
        stats = segment_and_clean(paths, "valid", LIMITS_CFG, group, segment)
    scratch = tmp_path / "scratch"
    assert calls == [("valid", "en", scratch / "valid.en"), ("valid", "fr", scratch / "valid.fr")]
    warning = f"cleaning removed 1 of 3 valid (after BPE) pairs (33%, more than 20%), most by ratio (1): {WARNING_TAIL}"
    assert stats == {
        "input": 3,
        "kept": 2,
        "removed": {"ratio": 1},
        "warning": warning,
        "dropped_file": "valid.dropped.tsv",
    }
    out = tmp_path / "bpe"
    kept = clean_corpus_n(seg["en"], seg["fr"], 1.5, 1, 6)
    assert kept == [1, 3]
    for lang in ("en", "fr"):
        assert _lines(out / f"valid.{lang}") == [seg[lang][n - 1] for n in kept]
        assert _lines(out / f"valid.tok.{lang}") == [tok[lang][n - 1] for n in kept]
        assert _lines(out / f"valid.ref.{lang}") == [tok[lang][n - 1].upper() for n in kept]
    assert _lines(out / "valid.dropped.tsv")[1:] == ["2\tratio\tthe w@@ k@@ p@@ g@@ y\tle chat"]
    assert _records(caplog) == [
        ("WARNING", warning),
        ("INFO", "valid: kept 2 of 3 pairs after segmenting (ratio 1)"),
    ]


def test_train_gets_no_companions_and_logs_none_removed(tmp_path: Path, caplog) -> None:
    tok = {"en": ["a b", "c d"], "fr": ["e f", "g h"]}
    paths, segment, _ = _split_dirs(tmp_path, "train", tok, tok)
    with caplog.at_level(logging.INFO, logger=CLEAN_LOG), AtomicGroup() as group:
        stats = segment_and_clean(paths, "train", LIMITS_CFG, group, segment)
    assert stats == {"input": 2, "kept": 2, "removed": {}, "dropped_file": "train.dropped.tsv"}
    assert sorted(p.name for p in (tmp_path / "bpe").iterdir()) == [
        "train.dropped.tsv",
        "train.en",
        "train.fr",
    ]
    assert _records(caplog) == [("INFO", "train: kept 2 of 2 pairs after segmenting (none removed)")]


def test_a_split_emptied_by_cleaning_lists_every_reason(tmp_path: Path) -> None:
    tok = {"en": ["a", "a b c d"], "fr": ["", "e"]}
    paths, segment, _ = _split_dirs(tmp_path, "valid", tok, tok)
    with pytest.raises(InputError) as err, AtomicGroup() as group:
        segment_and_clean(paths, "valid", LIMITS_CFG, group, segment)
    assert str(err.value) == (
        f"{tmp_path}/tok/valid.en: split 'valid' is empty after cleaning on subwords (all 2 pairs removed: "
        "empty 1, ratio 1); check --ratio/--min-len/--max-len"
    )
