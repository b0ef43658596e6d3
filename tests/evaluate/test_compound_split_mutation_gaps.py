"""Fast tests for the compound_split mutants the other tests let survive (make mutate MODULE=compound_split).

Oracles: the replace-unicode-punctuation.perl substitutions written out by hand from the perl
(moses-smt/mosesdecoder @3445289 scripts/tokenizer/replace-unicode-punctuation.perl:18-53), views
tokenized by hand, and sacrebleu's BLEU on those hand-written views as the peer for the score.
"""

from __future__ import annotations

import pytest
import sacrebleu

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate import compound_split as CS
from pipeline_lib.evaluate.metric_registry import ScoreInputs

# (fullwidth or typographic character, what Moses' perl writes), one substitution per line of the perl
PERL = [
    ("，", ","), ("、", ","), ("”", '"'), ("“", '"'), ("∶", ":"), ("：", ":"), ("？", "?"), ("《", '"'),
    ("》", '"'), ("）", ")"), ("！", "!"), ("（", "("), ("；", ";"), ("」", '"'), ("「", '"'), ("０", "0"),
    ("１", "1"), ("２", "2"), ("３", "3"), ("４", "4"), ("５", "5"), ("６", "6"), ("７", "7"), ("８", "8"),
    ("９", "9"), ("～", "~"), ("’", "'"), ("…", "..."), ("━", "-"), ("〈", "<"), ("〉", ">"), ("【", "["),
    ("】", "]"), ("％", "%"),
]  # fmt: skip


@pytest.mark.parametrize(("char", "ascii"), PERL, ids=[f"U+{ord(c):04X}" for c, _ in PERL])
def test_each_substitution_of_the_perl_script(char: str, ascii: str) -> None:
    assert CS.replace_unicode_punctuation(f"a{char}b", "t2t") == f"a{ascii}b"
    # dlcl's copy differs only in fullwidth 1 (its line 27: a quote)
    assert CS.replace_unicode_punctuation(f"a{char}b", "wang") == ('a"b' if char == "１" else f"a{ascii}b")


def test_full_stops_take_the_spaces_after_them() -> None:
    assert CS.replace_unicode_punctuation("x。y．z", "t2t") == "x. y. z"
    assert CS.replace_unicode_punctuation("x。   y．  z。", "wang") == "x. y. z. "
    assert CS.replace_unicode_punctuation("plain text. stays", "t2t") == "plain text. stays"


def test_views_refuse_an_unknown_scheme_and_wang_needs_the_tokenized_reference() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown compound-split scheme 'moses' \(choose from \['t2t', 'wang'\]\)"
    ):
        CS.hypothesis_view("moses", ["a"], "de")
    with pytest.raises(ConfigError, match="give --ref-tok"):
        CS.reference_view("wang", ["a"], None, "de")


def test_the_views_tokenize_in_the_given_language() -> None:
    # tokenizer.perl keeps a period after a known prefix of the language: "Sra" is Spanish, not German,
    # so -l de splits it (sacremoses without a language knows every language's prefixes and keeps it)
    assert CS.hypothesis_view("t2t", ["Sra. Lopez kam."], "de") == ["Sra . Lopez kam ."]
    assert CS.reference_view("t2t", ["Sra. Lopez kam."], None, "de") == ["Sra . Lopez kam ."]
    assert CS.reference_view("wang", [], ["Sra . Lopez kam ."], "de") == ["Sra . Lopez kam ."]
    # wang detokenizes in the language too: English Moses text round-trips to "it &apos;s" (-l en splits
    # off 's), where a detokenizer without a language would leave "it' s" and the view "it &apos; s"
    assert CS.reference_view("wang", [], ["it &apos;s a test ."], "en") == ["it &apos;s a test ."]


def test_the_reference_views_read_what_each_script_reads() -> None:
    refs = ["Die Mit-Arbeiter kamen ."]  # detokenized reference: t2t reads this
    ref_tok = ["Das E @-@ Mail kam ."]  # the preprocessed reference: wang detokenizes it first
    # by hand: tokenizer.perl -l de without -a keeps words with hyphens whole, then the ##AT## split
    assert CS.reference_view("t2t", refs, ref_tok, "de") == ["Die Mit ##AT##-##AT## Arbeiter kamen ."]
    assert CS.reference_view("wang", refs, ref_tok, "de") == ["Das E ##AT##-##AT## Mail kam ."]
    assert CS.hypothesis_view("wang", ["E-Mail １ kam."], "de") == ["E ##AT##-##AT## Mail &quot; kam ."]


@pytest.mark.parametrize("scheme", ["t2t", "wang"])
def test_score_is_multi_bleu_on_the_views_with_the_schemes_signature(scheme: str) -> None:
    hyps = ["Sra. Lopez und die Mit-Arbeiter kamen heute nicht.", "Ein kleiner Test-Satz hier."]
    refs = ["Sra. Lopez und die Mit-Arbeiter kamen gestern nicht.", "Ein kleiner Test-Satz ist hier."]
    ref_tok = [
        "Sra . Lopez und die Mit @-@ Arbeiter kamen gestern nicht .",
        "Ein kleiner Test @-@ Satz ist hier .",
    ]
    # the views by hand (tokenizer.perl -l de: "Sra" is no German prefix, its period splits), then
    # sacrebleu without its own tokenization as the peer multi-bleu.perl
    hyp_view = ["Sra . Lopez und die Mit ##AT##-##AT## Arbeiter kamen heute nicht .",
                "Ein kleiner Test ##AT##-##AT## Satz hier ."]  # fmt: skip
    ref_view = ["Sra . Lopez und die Mit ##AT##-##AT## Arbeiter kamen gestern nicht .",
                "Ein kleiner Test ##AT##-##AT## Satz ist hier ."]  # fmt: skip
    peer = sacrebleu.corpus_bleu(hyp_view, [ref_view], tokenize="none", smooth_method="none", force=True)
    inputs = ScoreInputs(hyps=hyps, refs=refs, moses_lang="de", ref_tok=ref_tok)
    result = (CS.score_t2t if scheme == "t2t" else CS.score_wang)(inputs)
    assert result["score"] == pytest.approx(peer.score) and 0 < peer.score < 100
    where = {
        "t2t": "tensor2tensor@bafdc1b get_ende_bleu.sh",
        "wang": "dlcl@c632ee2 wmt_en2de_google_multi_bleu.sh",
    }
    assert f"|tok:moses-de-no-a+unicode-punct({where[scheme]})|" in result["signature"]
    assert f"|compound-split:{scheme}|" in result["signature"] and "pre-tokenized" not in result["signature"]
    assert CS.score(scheme, hyps, refs, ref_tok, "de")["score"] == pytest.approx(peer.score)


@pytest.mark.parametrize("metric", [CS.score_t2t, CS.score_wang])
def test_a_missing_moses_language_is_the_empty_default(metric) -> None:
    # ScoreInputs without --moses-lang: the tokenizer's default language, not an error
    result = metric(ScoreInputs(hyps=["a b-c ."], refs=["a b-c ."], ref_tok=["a b @-@ c ."]))
    assert result["score"] == pytest.approx(100.0)
    assert "|tok:moses--no-a+unicode-punct(" in result["signature"]
