"""Corpus BLEU of a two-sentence corpus worked out by hand, for tokenized BLEU (multi-bleu.perl:
no smoothing) and sacreBLEU (13a, exp smoothing: no precision is zero here, so it does not apply,
and these lowercase words without punctuation tokenize the same)."""

from __future__ import annotations

import math

import pytest

from pipeline_lib.evaluate.metrics import sacre_bleu, tokenized_bleu

HYPS = ["the cat sat on the mat", "a dog barked loudly"]
REFS = ["the cat sat on the mat", "a dog barked very loudly today"]

# Matched / total n-grams, clipped counts, summed over the corpus:
#   sentence 1 (identical, 6 words): 1-grams 6/6, 2-grams 5/5, 3-grams 4/4, 4-grams 3/3
#   sentence 2 (4 words vs 6):       1-grams 4/4 (a, dog, barked, loudly all occur in the reference)
#                                    2-grams 2/3 ("a dog", "dog barked"; not "barked loudly")
#                                    3-grams 1/2 ("a dog barked"; not "dog barked loudly")
#                                    4-grams 0/1
#   corpus: p1 = 10/10, p2 = 7/8, p3 = 5/6, p4 = 3/4
# Lengths: hypothesis c = 6 + 4 = 10, reference r = 6 + 6 = 12; c < r, so BP = exp(1 - r/c) = exp(-0.2).
# BLEU = BP * (p1 p2 p3 p4) ** (1/4) = exp(-0.2) * (1 * 7/8 * 5/6 * 3/4) ** (1/4)
#      = exp(-0.2) * (35/64) ** (1/4) = 0.818731 * 0.859942 = 0.704059  -> 70.41
PRECISIONS = [100.0, 100 * 7 / 8, 100 * 5 / 6, 100 * 3 / 4]
BP = math.exp(-0.2)
BLEU = 100 * BP * (35 / 64) ** 0.25


@pytest.mark.parametrize("metric", [tokenized_bleu, sacre_bleu])
def test_two_sentence_corpus_bleu_by_hand(metric) -> None:
    result = metric(HYPS, REFS)
    assert (result["sys_len"], result["ref_len"]) == (10, 12)
    assert result["precisions"] == pytest.approx(PRECISIONS, rel=1e-12)
    assert result["bp"] == pytest.approx(BP, rel=1e-12)
    assert result["score"] == pytest.approx(BLEU, rel=1e-12)
    assert round(result["score"], 2) == 70.41


def test_corpus_bleu_is_not_the_mean_of_sentence_bleus() -> None:
    # Sentence 2 alone has no matching 4-gram: unsmoothed BLEU 0; the corpus pools the counts.
    assert tokenized_bleu(HYPS[1:], REFS[1:])["score"] == 0.0
    assert tokenized_bleu(HYPS, REFS)["score"] == pytest.approx(BLEU, rel=1e-12)
