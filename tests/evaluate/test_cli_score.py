"""`score`: sacreBLEU/chrF/TER equal the sacrebleu CLI, tokenized BLEU follows multi-bleu.perl,
METEOR reports its matching modules, bad input fails with file:line and never clobbers results."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nltk.stem.snowball import SnowballStemmer

from pipeline_lib.atomic import is_temp_file
from pipeline_lib.errors import InputError
from pipeline_lib.evaluate import meteor as meteor_module
from pipeline_lib.evaluate import metrics as M
from pipeline_lib.evaluate.meteor import SNOWBALL, _NoSynonyms, meteor
from pipeline_lib.evaluate.segments import read_segments

DATA = Path(__file__).parents[1] / "fixtures" / "evaluate"
REF = DATA / "ref.en"


def _variant(lines: list[str], p_drop: float, p_replace: float, seed: int) -> list[str]:
    """A synthetic 'system': the reference with words dropped or replaced at random."""
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = [w for w in line.split() if rng.random() > p_drop]
        out.append(" ".join("the" if rng.random() < p_replace else w for w in words))
    return out


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _pipeline(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline_lib", *args], capture_output=True, text=True, check=False
    )


# The CLI prints scores with this many decimals; ours, printed the same way, must be identical.
CLI_WIDTH = 10


def _sacrebleu_cli(ref: Path, hyp: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-m", "bleu", "chrf", "ter"]
        + ["-f", "json", "-w", str(CLI_WIDTH)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {entry["name"]: entry["score"] for entry in json.loads(proc.stdout)}


@pytest.fixture
def hyp_with_empty_line(tmp_path: Path) -> Path:
    lines = _variant(read_segments(REF), 0.15, 0.1, seed=1)
    lines[7] = ""  # an empty hypothesis must be scored (as all-wrong), not dropped
    return _write(tmp_path / "sys.en", lines)


def test_score_equals_sacrebleu_cli(tmp_path: Path, hyp_with_empty_line: Path) -> None:
    out = tmp_path / "scores" / "sys.json"
    proc = _pipeline("score", "--hyp", str(hyp_with_empty_line), "--ref", str(REF), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    cli = _sacrebleu_cli(REF, hyp_with_empty_line)
    assert result["n_segments"] == 30
    assert result["n_empty_hypotheses"] == 1
    for ours, theirs in (("bleu", "BLEU"), ("chrf", "chrF2"), ("ter", "TER")):
        assert float(f"{result['scores'][ours]['score']:.{CLI_WIDTH}f}") == cli[theirs]
    assert result["scores"]["bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|")
    assert "case:lc|tok:tercom" in result["scores"]["ter"]["signature"]
    assert "nc:6|nw:0" in result["scores"]["chrf"]["signature"]
    # no tokenized inputs given -> no tokenized BLEU, but METEOR is there and says how it matched
    assert "tok_bleu" not in result["scores"]
    assert set(result["scores"]["meteor"]["modules"]) >= {"exact", "stem"}


def test_empty_hypothesis_line_is_scored_not_dropped(tmp_path: Path, hyp_with_empty_line: Path) -> None:
    refs = read_segments(REF)
    hyps = read_segments(hyp_with_empty_line)
    assert len(hyps) == len(refs) and hyps[7] == ""
    full = M.sacre_bleu(hyps, refs)
    dropped = M.sacre_bleu(hyps[:7] + hyps[8:], refs[:7] + refs[8:])
    # the empty line's reference still counts towards the reference length (and lowers BLEU)
    assert full["ref_len"] > dropped["ref_len"]
    assert full["score"] < dropped["score"]


def test_tokenized_bleu_hand_checked() -> None:
    # multi-bleu.perl semantics, worked by hand (counts clipped per sentence, summed over the corpus):
    # hyp1 "the cat sat on the mat" vs ref1 "the cat sat on a mat ."
    #   1-grams 5/6 (second "the" clipped), 2-grams 3/5, 3-grams 2/4, 4-grams 1/3
    # hyp2 "He went home ." vs ref2 "He went home early ."
    #   1-grams 4/4, 2-grams 2/3, 3-grams 1/2, 4-grams 0/1
    # corpus: 9/10, 5/8, 3/6, 1/4; hyp_len 10 < ref_len 12 -> BP = exp(1 - 12/10)
    hyps = ["the cat sat on the mat", "He went home ."]
    refs = ["the cat sat on a mat .", "He went home early ."]
    result = M.tokenized_bleu(hyps, refs)
    expected = 100 * math.exp(1 - 12 / 10) * (0.9 * 0.625 * 0.5 * 0.25) ** 0.25
    assert result["score"] == pytest.approx(expected, abs=1e-9)  # 42.16
    assert result["precisions"] == pytest.approx([90.0, 62.5, 50.0, 25.0])
    assert (result["sys_len"], result["ref_len"]) == (10, 12)
    # multi-bleu.perl is case-sensitive and splits on whitespace only: "The" != "the", "mat." is one token
    assert M.tokenized_bleu(["The cat sat on the mat."], ["the cat sat on the mat ."])["precisions"][0] == (
        pytest.approx(100 * 4 / 6)
    )


def test_tokenized_bleu_has_no_smoothing() -> None:
    # No matching 4-gram anywhere: multi-bleu.perl gives exactly 0 (log(0) -> -9999999999),
    # while sacreBLEU's default exp smoothing would give a positive score.
    hyps = ["a b c x d e f"]
    refs = ["a b c y d e f"]
    assert M.tokenized_bleu(hyps, refs)["score"] == 0.0
    assert M.sacre_bleu(hyps, refs)["score"] > 0.0


def test_compound_split_matches_perl_convention() -> None:
    line = "a state-of-the-art , 34-year-old a-b-c x - y"
    expected = (
        "a state ##AT##-##AT## of ##AT##-##AT## the ##AT##-##AT## art , "
        "34 ##AT##-##AT## year ##AT##-##AT## old a ##AT##-##AT## b-c x - y"
    )
    assert M.split_compounds(line) == expected
    perl = shutil.which("perl")
    if perl is None:
        pytest.skip("perl not installed: only the hand-written expectation was checked")
    proc = subprocess.run(
        [perl, "-ple", r"s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g"],
        input=line + "\n",
        capture_output=True,
        text=True,
    )
    assert proc.stdout.rstrip("\n") == expected


def test_compound_split_changes_tokenized_bleu() -> None:
    hyps = ["a well-known model"]
    refs = ["a well-made model"]
    plain = M.tokenized_bleu(hyps, refs)
    split = M.tokenized_bleu(hyps, refs, compound_split=True)
    # split: "a well ##AT##-##AT## known model" vs "a well ##AT##-##AT## made model": more matches
    assert split["precisions"][0] == pytest.approx(100 * 4 / 5)
    assert plain["precisions"][0] == pytest.approx(100 * 2 / 3)
    assert "compound-split:yes" in split["signature"]


def test_score_cli_tokenized_bleu_from_files(tmp_path: Path) -> None:
    # the hand-checked corpus above as tokenized files next to their detokenized versions
    hyp = _write(tmp_path / "h.txt", ["the cat sat on the mat", "He went home."])
    ref = _write(tmp_path / "r.txt", ["the cat sat on a mat.", "He went home early."])
    htok = _write(tmp_path / "h.tok", ["the cat sat on the mat", "He went home ."])
    rtok = _write(tmp_path / "r.tok", ["the cat sat on a mat .", "He went home early ."])
    out = tmp_path / "s.json"
    proc = _pipeline(
        "score", "--hyp", str(hyp), "--ref", str(ref), "--hyp-tok", str(htok), "--ref-tok", str(rtok),
        "--metrics", "bleu", "tok_bleu_retok", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(out.read_text())["scores"]
    assert set(scores) == {"bleu", "tok_bleu_retok"}
    assert scores["tok_bleu_retok"]["score"] == pytest.approx(
        100 * math.exp(-0.2) * 0.0703125**0.25, abs=1e-9
    )
    assert scores["tok_bleu_retok"]["hypothesis_tok"] == str(htok)


def test_moses_lang_tokenizes_detokenized_inputs() -> None:
    from argparse import Namespace

    from pipeline_lib.evaluate.cli_score import _tokenized_inputs

    args = Namespace(hyp="h", ref="r", hyp_tok=None, ref_tok=None, ref_tok_meta=None, moses_lang="en")
    hyp_tok, ref_tok, _ = _tokenized_inputs(args, ['He said: "a well-known fact."'], ["It's fine."])
    assert hyp_tok == ["He said : &quot; a well @-@ known fact . &quot;"]
    assert ref_tok == ["It &apos;s fine ."]


def test_meteor_single_segment_equals_nltk() -> None:
    from nltk.translate.meteor_score import single_meteor_score

    hyp = "The cats were running quickly to the old house"
    ref = "the cat runs quickly towards the old houses"
    got = meteor([hyp], [ref], lang="en", use_wordnet=False)
    want = single_meteor_score(
        ref.split(), hyp.split(), stemmer=SnowballStemmer("english"), wordnet=_NoSynonyms()
    )
    assert got["score"] == pytest.approx(100 * want)
    assert got["modules"] == ["exact", "stem"]
    # "cats"/"cat", "running"/"runs", "house"/"houses" only match through the stemmer
    assert got["matches"] == 7
    assert "lang:en|modules:exact+stem|stemmer:snowball-english" in got["signature"]


@pytest.mark.parametrize(
    ("lang", "hyp", "ref"),
    [("fr", "elle chantait et mangeait", "elle chanter et manger"),
     ("de", "die kleinen Häuser", "die kleine Hauses")],
)  # fmt: skip
def test_meteor_stems_with_the_target_languages_stemmer(lang: str, hyp: str, ref: str) -> None:
    """Inflections that only the language's own stemmer relates (English Snowball leaves them apart)."""
    native = meteor([hyp], [ref], lang=lang, use_wordnet=False)
    english = meteor([hyp], [ref], lang="en", use_wordnet=False)
    assert native["matches"] == len(hyp.split())
    assert english["matches"] < native["matches"]
    assert f"lang:{lang}|modules:exact+stem|stemmer:snowball-{SNOWBALL[lang]}" in native["signature"]


def test_meteor_synonyms_only_for_english_and_no_stemmer_means_exact_only(monkeypatch) -> None:
    class Lemma:
        def __init__(self, name: str) -> None:
            self._name = name

        def name(self) -> str:
            return self._name

    class Synset:
        def lemmas(self) -> list[Lemma]:
            return [Lemma("car"), Lemma("auto")]

    class Synonyms:  # WordNet stand-in: "auto" and "car" share a synset
        def synsets(self, word: str) -> list[Synset]:
            return [Synset()] if word in ("car", "auto") else []

    monkeypatch.setattr(meteor_module, "load_wordnet", lambda: Synonyms())
    en = meteor(["the auto"], ["the car"], lang="en")
    assert en["modules"] == ["exact", "stem", "synonym"] and en["matches"] == 2
    fr = meteor(["la auto"], ["la car"], lang="fr")
    assert fr["modules"] == ["exact", "stem"] and fr["matches"] == 1
    cs = meteor(["domy domu"], ["domy dům"], lang="cs")
    assert cs["modules"] == ["exact"] and cs["stemmer"] is None and "stemmer:snowball-none" in cs["signature"]


def test_score_without_lang_refuses_meteor(tmp_path: Path) -> None:
    (tmp_path / "h").write_text("a b\n", encoding="utf-8")
    (tmp_path / "r").write_text("a b\n", encoding="utf-8")  # no .xx suffix to take the language from
    base = [sys.executable, "-m", "pipeline_lib", "score", "--hyp", str(tmp_path / "h"), "--ref", str(tmp_path / "r"),
            "--output", str(tmp_path / "s.json")]  # fmt: skip
    proc = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "METEOR needs --lang" in proc.stderr
    proc = subprocess.run([*base, "--metrics", "bleu", "chrf"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_meteor_corpus_aggregates_statistics() -> None:
    hyps = ["the cat sat", "a completely different sentence here"]
    refs = ["the cat sat", "nothing alike"]
    got = meteor(hyps, refs, lang="en", use_wordnet=False)
    # corpus statistics, not the mean of segment scores: 3 matches, 1 chunk, lengths 8 and 5
    p, r = 3 / 8, 3 / 5
    fmean = p * r / (0.9 * p + 0.1 * r)
    assert got["score"] == pytest.approx(100 * fmean * (1 - 0.5 * (1 / 3) ** 3))
    assert got["segment_mean"] != pytest.approx(got["score"])


# ---------------------------------------------------------------- bad input


def test_line_count_mismatch_names_file_and_line(tmp_path: Path) -> None:
    refs = read_segments(REF)
    hyp = _write(tmp_path / "short.en", refs[:-2])
    proc = _pipeline("score", "--hyp", str(hyp), "--ref", str(REF), "-o", str(tmp_path / "o.json"))
    assert proc.returncode == 2
    assert "short.en has 28 lines" in proc.stderr and f"{REF}:29" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o.json").exists()


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    refs = read_segments(REF)
    hyp = tmp_path / "bad.en"
    data = "".join(line + "\n" for line in refs).encode()
    lines = data.split(b"\n")
    lines[4] = lines[4] + b" caf\xe9"  # Latin-1 byte in a UTF-8 file
    hyp.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=r"bad\.en:5: invalid UTF-8"):
        read_segments(hyp)


def test_empty_reference_line_is_an_error(tmp_path: Path) -> None:
    refs = read_segments(REF)
    refs[2] = ""
    ref = _write(tmp_path / "ref.en", refs)
    hyp = _write(tmp_path / "hyp.en", read_segments(REF))
    proc = _pipeline("score", "--hyp", str(hyp), "--ref", str(ref), "-o", str(tmp_path / "o.json"))
    assert proc.returncode == 2
    assert f"{ref}:3: empty line" in proc.stderr


def test_bad_input_keeps_previous_result(tmp_path: Path) -> None:
    out = tmp_path / "sys.json"
    good = _write(tmp_path / "sys.en", read_segments(REF))
    assert _pipeline("score", "--hyp", str(good), "--ref", str(REF), "-o", str(out)).returncode == 0
    before = out.read_text()
    assert json.loads(before)["scores"]["bleu"]["score"] == pytest.approx(100.0)
    good.write_bytes(good.read_bytes() + b"\xff\n")  # now 31 lines, the last one invalid
    proc = _pipeline("score", "--hyp", str(good), "--ref", str(REF), "-o", str(out))
    assert proc.returncode == 2 and "sys.en:31" in proc.stderr
    assert out.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if is_temp_file(p)] == []


@pytest.mark.parametrize("stage", ["score", "significance"])
def test_empty_files_are_a_clear_error(tmp_path: Path, stage: str) -> None:
    """Two empty files: rc 2, one line naming the reference, no traceback, nothing written."""
    ref, hyp = tmp_path / "ref.en", tmp_path / "hyp.en"
    ref.write_text("")
    hyp.write_text("")
    out = tmp_path / "o.json"
    args = ["--hyp", str(hyp)] if stage == "score" else ["--baseline", f"a={hyp}", "--systems", f"b={hyp}"]
    proc = _pipeline(stage, *args, "--ref", str(ref), "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert f"{ref}: empty file" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_nul_byte_in_a_hypothesis_names_file_line_and_column(tmp_path: Path) -> None:
    lines = read_segments(REF)
    hyp = _write(tmp_path / "hyp.en", lines)
    data = hyp.read_bytes().split(b"\n")
    data[6] = data[6][:3] + b"\x00" + data[6][3:]
    hyp.write_bytes(b"\n".join(data))
    out = tmp_path / "o.json"
    proc = _pipeline("score", "--hyp", str(hyp), "--ref", str(REF), "-o", str(out))
    assert proc.returncode == 2 and f"{hyp}:7: NUL byte at column 4" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
