"""Corpus-level MT metrics through sacrebleu's library API (never re-implemented here).

- sacreBLEU: 13a tokenisation, mixed case, exp smoothing (the sacrebleu defaults).
- Tokenized BLEU: the multi-bleu.perl convention (BLEU on whitespace tokens of Moses-tokenized text,
  case-sensitive, no smoothing: a zero n-gram precision gives 0), computed with sacrebleu's BLEU
  (``tokenize='none'``, ``smooth_method='none'``), optionally after the En-De ``##AT##`` compound split.
- TER: sacrebleu defaults, i.e. tercom settings (``case:lc|tok:tercom|norm:no|punct:yes|asian:no``).
- chrF2: sacrebleu defaults (character 6-grams, beta 2, no word n-grams).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

from pipeline_lib.evaluate.metric_registry import ScoreInputs

# The En-De "compound splitting" used since Vaswani et al. 2017 (t2t / fairseq compound_split_bleu.sh):
#   perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
# Python's re.sub is left-to-right and non-overlapping like Perl's s///g, so "a-b-c" becomes
# "a ##AT##-##AT## b-c" in both (the second hyphen's left neighbour was consumed by the first match).
_COMPOUND = re.compile(r"(\S)-(\S)")


def split_compounds(line: str) -> str:
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def _bleu_details(score: Any) -> dict[str, Any]:
    return {
        "score": score.score,
        "precisions": list(score.precisions),
        "bp": score.bp,
        "ratio": score.sys_len / score.ref_len if score.ref_len else 0.0,
        "sys_len": int(score.sys_len),
        "ref_len": int(score.ref_len),
    }


def sacre_bleu(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    metric = BLEU()  # tok 13a, case mixed, smooth exp: the signature every paper reports
    score = metric.corpus_score(list(hyps), [list(refs)])
    return {**_bleu_details(score), "signature": metric.get_signature().format()}


def tokenized_bleu(
    hyps_tok: Sequence[str], refs_tok: Sequence[str], *, compound_split: bool = False, lowercase: bool = False
) -> dict[str, Any]:
    """BLEU as multi-bleu.perl computes it on already tokenized text."""
    hyps, refs = list(hyps_tok), list(refs_tok)
    if compound_split:
        hyps = [split_compounds(h) for h in hyps]
        refs = [split_compounds(r) for r in refs]
    # force=True: sacrebleu warns on tokenized input; here tokenized input is the whole point.
    metric = BLEU(tokenize="none", smooth_method="none", lowercase=lowercase, force=True)
    score = metric.corpus_score(hyps, [refs])
    case = "lc" if lowercase else "mixed"
    compound = "yes" if compound_split else "no"
    signature = (
        f"multi-bleu.perl|nrefs:1|case:{case}|tok:none(pre-tokenized)|smooth:none|"
        f"compound-split:{compound}|version:sacrebleu-{sacrebleu.__version__}"
    )
    return {**_bleu_details(score), "signature": signature}


def ter(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    metric = TER()
    score = metric.corpus_score(list(hyps), [list(refs)])
    return {
        "score": score.score,
        "num_edits": float(score.num_edits),
        "ref_length": float(score.ref_length),
        "signature": metric.get_signature().format(),
    }


def chrf2(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    metric = CHRF()  # char order 6, word order 0, beta 2 = chrF2
    score = metric.corpus_score(list(hyps), [list(refs)])
    return {"score": score.score, "signature": metric.get_signature().format()}


# The registry's entry points (pipeline_lib.evaluate.metric_registry): one ScoreInputs each.
def score_sacre_bleu(inputs: ScoreInputs) -> dict[str, Any]:
    return sacre_bleu(inputs.hyps, inputs.refs)


def score_tokenized_bleu(inputs: ScoreInputs) -> dict[str, Any]:
    """tok_bleu: against the preprocessed reference, never split; records where both sides came from."""
    if inputs.tokenized is None:
        raise ValueError("tok_bleu needs the tokenized pair (score checks this before computing)")
    hyp_tok, ref_tok, sources = inputs.tokenized
    return {**tokenized_bleu(hyp_tok, ref_tok), **sources}


def score_ter(inputs: ScoreInputs) -> dict[str, Any]:
    return ter(inputs.hyps, inputs.refs)


def score_chrf2(inputs: ScoreInputs) -> dict[str, Any]:
    return chrf2(inputs.hyps, inputs.refs)
