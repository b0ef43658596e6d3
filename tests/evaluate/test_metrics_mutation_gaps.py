"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/evaluate/metrics.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import pytest

from pipeline_lib.evaluate.metrics import (
    chrf2,
    sacre_bleu,
    ter,
    tokenized_bleu,
)

# -- corpus metrics (pipeline_lib/evaluate/metrics.py) -------------------------------------------


def test_ter_hand_computed_and_directed() -> None:
    # one substitution over 4 reference words; 2 insertions needed vs 2 deletions over a 2-word reference
    assert ter(["a b x d"], ["a b c d"]) == {
        "score": 25.0,
        "num_edits": 1.0,
        "ref_length": 4.0,
        "signature": "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0",
    }
    assert ter(["a b"], ["a b c d"])["score"] == 50.0
    assert ter(["a b c d"], ["a b"])["score"] == 100.0


def test_chrf2_hand_computed_and_recall_weighted() -> None:
    # hyp "ab", ref "abcd": orders 1-2 have hypothesis n-grams; P = 1, R = (2/4 + 1/3) / 2 = 5/12,
    # chrF_2 = 5PR / (4P + R) = 2500/53. Swapped: P = 5/12, R = 1 -> 25/32. Recall weighs 4x.
    short = chrf2(["ab"], ["abcd"])
    assert short["score"] == pytest.approx(2500 / 53, rel=1e-12)
    assert chrf2(["abcd"], ["ab"])["score"] == pytest.approx(100 * 25 / 32, rel=1e-12)
    assert short["signature"] == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"


def test_bleu_details_length_ratio_and_signatures() -> None:
    short = tokenized_bleu(["a b c"], ["a b c d"])
    assert short["ratio"] == 0.75 and (short["sys_len"], short["ref_len"]) == (3, 4)
    assert tokenized_bleu([""], [""])["ratio"] == 0.0  # an empty reference side: no division by zero
    assert (
        sacre_bleu(["a b"], ["a b"])["signature"]
        == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    )


def test_tokenized_bleu_lowercase_and_compound_split_show_in_the_signature() -> None:
    plain = tokenized_bleu(["A B C D"], ["a b c d"])
    lower = tokenized_bleu(["A B C D"], ["a b c d"], lowercase=True)
    assert plain["score"] == 0.0 and lower["score"] == pytest.approx(100.0)
    assert "|case:mixed|" in plain["signature"] and "|compound-split:no|" in plain["signature"]
    split = tokenized_bleu(["a-b"], ["a-b"], compound_split=True, lowercase=True)
    assert "|case:lc|" in split["signature"] and "|compound-split:yes|" in split["signature"]
