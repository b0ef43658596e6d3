"""`analyze` (Figure 3): word F-measure by training frequency and BLEU by length, on a hand-made
example whose counts are worked out by hand below."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from pipeline_lib.evaluate import analysis as A

TRAIN = ["the cat sat on the mat", "the dog sat", "a cat ran", "the the the"]
# training counts: the=6 -> bucket "5-9"; cat=2, sat=2 -> "2"; on, mat, dog, a, ran=1 -> "1"; others "0"
REF = ["the cat sat on a mat", "a dog ran home"]
HYP = ["the cat sat on the rug", "the dog ran home home"]
# sentence 1: out  the x2 (5-9), cat sat (2), on (1), rug (0); ref the (5-9), cat sat (2), on a mat (1)
#             matched: the 1 (clipped), cat sat 2, on 1
# sentence 2: out  the (5-9), dog ran (1), home x2 (0); ref a dog ran (1), home (0)
#             matched: dog ran 2, home 1 (clipped)
EXPECTED = {  # bucket: (matched, ref_count, out_count, f_measure)
    "0": (1, 1, 3, 0.5),  # R 1, P 1/3
    "1": (3, 6, 3, 2 / 3),  # R 1/2, P 1
    "2": (2, 2, 2, 1.0),
    "3": (0, 0, 0, 0.0),
    "4": (0, 0, 0, 0.0),
    "5-9": (1, 1, 3, 0.5),
    "10-99": (0, 0, 0, 0.0),
    "100-999": (0, 0, 0, 0.0),
    "1000+": (0, 0, 0, 0.0),
}


def test_bucket_labels_follow_compare_mt_cutoffs() -> None:
    labels = [b.label for b in A.make_buckets(A.FREQ_CUTOFFS)]
    assert labels == list(EXPECTED)
    assert [b.label for b in A.make_buckets(A.LENGTH_CUTOFFS)] == [
        "0-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60+",
    ]  # fmt: skip
    assert [A.bucket_index(v, A.FREQ_CUTOFFS) for v in (0, 1, 4, 5, 9, 10, 999, 1000, 10**6)] == [
        0, 1, 4, 5, 5, 6, 7, 8, 8,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        A.make_buckets([10, 5])


def test_word_accuracy_hand_counted() -> None:
    freqs = A.count_frequencies(line.split() for line in TRAIN)
    rows = A.word_accuracy_by_frequency([h.split() for h in HYP], [r.split() for r in REF], freqs)
    got = {r["bucket"]: (r["matched"], r["ref_count"], r["out_count"], r["f_measure"]) for r in rows}
    assert got.keys() == EXPECTED.keys()
    for bucket, (matched, ref_count, out_count, f) in EXPECTED.items():
        assert got[bucket][:3] == (matched, ref_count, out_count), bucket
        assert got[bucket][3] == pytest.approx(f), bucket


def test_bleu_by_length_groups_segments() -> None:
    rows, signature = A.bleu_by_length(HYP, REF, lengths=[6, 4], cutoffs=[5], tokenize="none")
    assert [(r["bucket"], r["n_segments"]) for r in rows] == [("0-4", 1), ("5+", 1)]
    metric = BLEU(tokenize="none", force=True)
    assert rows[0]["bleu"] == pytest.approx(metric.corpus_score([HYP[1]], [[REF[1]]]).score)
    assert rows[1]["bleu"] == pytest.approx(metric.corpus_score([HYP[0]], [[REF[0]]]).score)
    assert "tok:none" in signature
    empty, _ = A.bleu_by_length(HYP, REF, lengths=[1, 2], cutoffs=[5, 10], tokenize="none")
    assert [r["bleu"] is None for r in empty] == [False, True, True]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_analyze_cli_writes_data_and_plots(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.en", TRAIN)
    ref = _write(tmp_path / "ref.en", REF)
    src = _write(tmp_path / "src.fr", ["le chat", "un chien a couru vers la maison ce soir"])  # 2 and 9 words
    good = _write(tmp_path / "good.en", HYP)
    bad = _write(tmp_path / "bad.en", ["rug rug", "home"])
    out = tmp_path / "fig3"
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "analyze", "--ref", str(ref), "--src", str(src)]
        + ["--systems", f"deep={good}", f"shallow={bad}", "--train-target", str(train), "--tokenize", "none"]
        + ["--length-cutoffs", "5", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "analysis.json").read_text())
    assert [s["name"] for s in result["systems"]] == ["deep", "shallow"]
    deep = {r["bucket"]: r for r in result["word_accuracy"]["systems"]["deep"]}
    assert {b: (r["matched"], r["ref_count"], r["out_count"]) for b, r in deep.items()} == {
        b: v[:3] for b, v in EXPECTED.items()
    }
    shallow = {r["bucket"]: r for r in result["word_accuracy"]["systems"]["shallow"]}
    assert (shallow["0"]["matched"], shallow["0"]["out_count"]) == (1, 3)  # "home" matched, "rug" x2 not
    assert result["length_bleu"]["length_of"] == "source"  # default when --src is given
    lb = result["length_bleu"]["systems"]["deep"]
    assert [(r["bucket"], r["n_segments"]) for r in lb] == [("0-4", 1), ("5+", 1)]
    with (out / "word_accuracy.tsv").open() as fh:
        tsv = list(csv.DictReader(fh, delimiter="\t"))
    assert len(tsv) == 2 * 9 and tsv[0]["system"] == "deep" and tsv[0]["bucket"] == "0"
    for png in ("word_accuracy.png", "length_bleu.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # precomputed counts give the same word accuracy as counting the training corpus
    counts = _write(
        tmp_path / "counts.tsv",
        [f"{w}\t{c}" for w, c in A.count_frequencies(t.split() for t in TRAIN).items()],
    )
    out2 = tmp_path / "fig3b"
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "analyze", "--ref", str(ref), "--systems", f"deep={good}"]
        + ["--freq-counts", str(counts), "--tokenize", "none", "--no-plots", "-o", str(out2)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    again = json.loads((out2 / "analysis.json").read_text())
    assert again["word_accuracy"]["systems"]["deep"] == result["word_accuracy"]["systems"]["deep"]
    assert again["length_bleu"]["length_of"] == "reference"
    assert not (out2 / "word_accuracy.png").exists()


def test_analyze_rejects_misaligned_system(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.en", REF)
    train = _write(tmp_path / "train.en", TRAIN)
    short = _write(tmp_path / "short.en", HYP[:1])
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "analyze", "--ref", str(ref), "--systems", str(short)]
        + ["--train-target", str(train), "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "short.en has 1 lines" in proc.stderr
    assert not (tmp_path / "out").exists()
