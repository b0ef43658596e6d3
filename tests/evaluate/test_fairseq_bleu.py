"""tok_bleu is fairseq-generate's BLEU4 (fairseq/bleu.py + libbleu): hand-counted oracles for its
corner cases (<<unk>> references, empty lines, subwords), the paired-bootstrap view counting the same,
and `score --generate` end to end. The fairseq-generate oracle itself: tests/export/test_fairseq_peer.py."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from pipeline_lib.cli import main as cli_main
from pipeline_lib.errors import InputError
from pipeline_lib.evaluate.fairseq_bleu import fairseq_bleu, paired_view, read_generate, reference_string


def _generate_file(path: Path, rows: list[tuple[str, list[str]]]) -> Path:
    """translate's --output-generate layout: S, T, then H/D/P per hypothesis."""
    lines = []
    for i, (ref, hyps) in enumerate(rows):
        lines += [f"S-{i}\tsrc", f"T-{i}\t{ref}"]
        for h in hyps:
            lines += [f"H-{i}\t-0.5\t{h}", f"D-{i}\t-0.5\t{h.replace('@@ ', '')}", f"P-{i}\t-0.5"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# Two sentences counted by hand (fairseq semantics):
#   1  H "the cat@@ s sat on mat" -> the cats sat on mat           (5 tokens)
#      T "the cat@@ s sat on the mat" -> the cats sat on the mat   (6)
#      matches/counts n=1..4: 5/5, 3/4, 2/3, 1/2
#   2  H "a <unk> dog" (the model's unknown word)                   (3)
#      T "a <unk> dog" -> "a <<unk>> dog": the binarized reference's unknown, escaped (3)
#      matches/counts: 2/3 (a, dog), 0/2, 0/1, none (3 < 4 tokens)
# Totals: 7/8, 3/6, 2/4, 1/2; syslen 8, reflen 9.
ROWS = [("the cat@@ s sat on the mat", ["the cat@@ s sat on mat"]), ("a <unk> dog", ["a <unk> dog"])]
HAND_BLEU = math.exp(1 - 9 / 8) * math.exp((math.log(7 / 8) + 3 * math.log(1 / 2)) / 4) * 100


def test_generate_file_scored_as_fairseq_generate(tmp_path: Path):
    gen = read_generate(_generate_file(tmp_path / "test.generate", ROWS), "bpe")
    assert gen.hyps == ["the cats sat on mat", "a <unk> dog"]
    assert gen.refs == ["the cats sat on the mat", "a <<unk>> dog"]
    out = fairseq_bleu(gen.hyps, gen.refs)
    assert out["score"] == pytest.approx(HAND_BLEU, abs=1e-9)  # 50.75
    assert out["precisions"] == pytest.approx([87.5, 50.0, 50.0, 50.0])
    assert (out["sys_len"], out["ref_len"]) == (8, 9)
    assert out["fairseq"] == (
        "BLEU4 = 50.75, 87.5/50.0/50.0/50.0 (BP=0.882, ratio=0.889, syslen=8, reflen=9)"
    )


def test_unknown_words_never_match():
    # fairseq masks the reference's <unk> id (-999) and escapes a binarized <unk> as <<unk>>: neither
    # matches the model's <unk>; a naive string BLEU would count 3/3 and score 100 here.
    assert fairseq_bleu(["<unk> b c d"], ["<unk> b c d"])["precisions"][0] == 75.0
    assert fairseq_bleu(["<unk> b c d"], ["<<unk>> b c d"])["precisions"][0] == 75.0
    # a subword unknown inside a word: "foo@@ <unk>" is one reference word
    assert reference_string("foo@@ <unk> bar", "bpe") == "foo<<unk>> bar"


def test_empty_lines_count_one_end_of_sentence_token():
    # libbleu's right trim never removes position 0: an empty line is [</s>], one token
    out = fairseq_bleu(["", "a b c d"], ["x y", "a b c d"])
    assert (out["sys_len"], out["ref_len"]) == (5, 6)
    assert out["precisions"][0] == pytest.approx(100 * 4 / 5)
    both_empty = fairseq_bleu([""], [""])
    assert both_empty["precisions"] == [100.0, 0.0, 0.0, 0.0] and both_empty["score"] == 0.0


def test_paired_view_counts_what_fairseq_counts():
    rng = random.Random(3)
    vocab = ["a", "b", "c", "d", "<unk>", "<<unk>>", "</s>", "e"]
    hyps, refs = [], []
    for _ in range(200):
        refs.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 9))))
        hyps.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 9))))
    ours = fairseq_bleu(hyps, refs)
    view_h, view_r = paired_view(hyps, refs)
    theirs = BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(view_h, [view_r])
    assert (theirs.sys_len, theirs.ref_len) == (ours["sys_len"], ours["ref_len"])
    assert theirs.score == pytest.approx(ours["score"], abs=1e-9)


def test_generate_without_reference_lines_fails_naming_the_file(tmp_path: Path):
    path = tmp_path / "x.generate"
    path.write_text("S-0\ta\nH-0\t-1.0\tb\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"x\.generate: no T-0 line"):
        read_generate(path, "bpe")


def test_score_cli_reports_fairseq_bleu_from_generate(tmp_path: Path):
    gen = _generate_file(tmp_path / "test.generate", [*ROWS, ("x y", ["x y", "y x"])])  # 2-best
    hyp = tmp_path / "test.hyp"
    hyp.write_text("the cats sat on mat\na <unk> dog\nx y\n", encoding="utf-8")
    ref = tmp_path / "test.en"
    ref.write_text("the cats sat on the mat\na big dog\nx y\n", encoding="utf-8")
    out = tmp_path / "score.json"
    argv = ["score", "--hyp", str(hyp), "--ref", str(ref), "--output", str(out)]
    assert cli_main([*argv, "--generate", str(gen), "--metrics", "tok_bleu", "bleu"]) == 0
    tok = json.loads(out.read_text())["scores"]["tok_bleu"]
    expected = fairseq_bleu(
        ["the cats sat on mat", "a <unk> dog", "x y"], ["the cats sat on the mat", "a <<unk>> dog", "x y"]
    )
    assert tok["score"] == pytest.approx(expected["score"]) and tok["fairseq"].startswith("BLEU4 = ")
    assert cli_main(argv) == 0  # by default, without --generate: no tok_bleu
    assert "tok_bleu" not in json.loads(out.read_text())["scores"]
