"""Compound-split tokenized BLEU as two En-De eval scripts compute it, each from detokenized text on
both sides: a metric of its own (``tok_bleu_t2t``, ``tok_bleu_wang``), never folded into ``tok_bleu``,
which scores against the preprocessed reference as the authors' fairseq-generate did (no split:
Transformer-Clinic @70f72b7 nmt-experiments/eval_wmt_en-de.sh:16-19 reports fairseq-generate's BLEU).

``t2t``: tensorflow/tensor2tensor @bafdc1b tensor2tensor/utils/get_ende_bleu.sh
  :9   replace-unicode-punctuation.perl -l de (Moses' copy: fullwidth 1 -> 1)
  :12  tokenizer.perl -l de, without -a (hyphens stay inside words)
  :18-19 perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g' on both files, then multi-bleu.perl (:22).
  The script reads its gold file already tokenized (:4, newstest2013.tok.de) and does not say how it
  was made; here the reference gets the hypothesis's lines 9 and 12 from the detokenized reference, so
  the two sides are tokenized alike and an exact hypothesis scores 100.

``wang``: wangqiangneu/dlcl @c632ee2 scripts/wmt_en2de_google_multi_bleu.sh, on both sides:
  :27-28 detokenizer.perl -l de of fairseq's tokenized H and T lines
  :31-32 dlcl's own replace-unicode-punctuation.perl (its line 27 maps fullwidth 1 to '"')
  :35-36 tokenizer.perl -l de, without -a;  :39-40 the ##AT## split;  :42 multi-bleu.perl.
  Our hypothesis file is already the Moses detokenization (detokenizer -l de) of the tokenized output;
  the reference is the Moses detokenization of the preprocessed (tokenized) reference, as dlcl's T
  lines. One difference stays: fairseq's T lines print a symbol under the vocabulary threshold as
  <<unk>>; our tokenized reference is text and has none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pipeline_lib.data.detok import moses_detokenize
from pipeline_lib.data.moses import TokConfig, tokenize_lines
from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.metric_registry import ScoreInputs, compound_split_metrics
from pipeline_lib.evaluate.metrics import split_compounds, tokenized_bleu

# metric name -> scheme, as the metric registry declares them
METRICS: dict[str, str] = compound_split_metrics()
SCHEMES: dict[str, str] = {scheme: metric for metric, scheme in METRICS.items()}
WHERE = {
    "t2t": "tensor2tensor@bafdc1b get_ende_bleu.sh",
    "wang": "dlcl@c632ee2 wmt_en2de_google_multi_bleu.sh",
}

# tokenizer.perl -l L without -a and without normalization (the scripts call nothing else before it)
TOKENIZE_NO_A = TokConfig(normalize=False, remove_non_printing=False, aggressive_dash_splits=False)

# Moses replace-unicode-punctuation.perl, substitution by substitution (moses-smt/mosesdecoder
# @3445289 scripts/tokenizer/replace-unicode-punctuation.perl:18-53; dlcl's copy,
# scripts/replace-unicode-punctuation.perl:13-48, is the same list but for fullwidth 1, below).
# Both run without binmode utf8, i.e. on UTF-8 bytes: every pattern is a whole character, so
# matching characters is the same thing.
_SINGLE = {
    "，": ",", "、": ",", "”": '"', "“": '"', "∶": ":", "：": ":", "？": "?", "《": '"', "》": '"',
    "）": ")", "！": "!", "（": "(", "；": ";", "」": '"', "「": '"', "０": "0", "１": "1", "２": "2",
    "３": "3", "４": "4", "５": "5", "６": "6", "７": "7", "８": "8", "９": "9", "～": "~", "’": "'",
    "…": "...", "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%",
}  # fmt: skip
# `s/。 */. /g` and `s/． */. /g`: a full stop and the spaces after it become ". " (spaces only:
# ` *` in the perl, not \s).
_FULL_STOP = re.compile("[。．] *")
_TABLES = {
    "t2t": str.maketrans(_SINGLE),
    "wang": str.maketrans({**_SINGLE, "１": '"'}),  # dlcl scripts/replace-unicode-punctuation.perl:27
}


def replace_unicode_punctuation(line: str, scheme: str) -> str:
    """The scheme's replace-unicode-punctuation.perl on one line. The perl runs its substitutions in
    order, but none produces a character a later one matches, so one pass is the same."""
    return _FULL_STOP.sub(". ", line).translate(_TABLES[scheme])


def _tokenize(lines: Sequence[str], lang: str, scheme: str) -> list[str]:
    punct = [replace_unicode_punctuation(line, scheme) for line in lines]
    return [split_compounds(line) for line in tokenize_lines(punct, lang, TOKENIZE_NO_A)]


def hypothesis_view(scheme: str, hyps: Sequence[str], lang: str) -> list[str]:
    """Detokenized hypotheses as the scheme's multi-bleu.perl reads them."""
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown compound-split scheme {scheme!r} (choose from {sorted(SCHEMES)})")
    return _tokenize(hyps, lang, scheme)


def reference_view(scheme: str, refs: Sequence[str], ref_tok: Sequence[str] | None, lang: str) -> list[str]:
    """The reference as the scheme's multi-bleu.perl reads it: ``t2t`` from the detokenized ``refs``;
    ``wang`` from the preprocessed reference ``ref_tok``, detokenized first as dlcl's script
    detokenizes fairseq's T lines."""
    if scheme == "wang":
        if ref_tok is None:
            raise ConfigError(
                "tok_bleu_wang detokenizes the tokenized reference, as dlcl's script does with fairseq's "
                "T lines: give --ref-tok"
            )
        refs = moses_detokenize(ref_tok, lang)
    return hypothesis_view(scheme, refs, lang)


def score(
    scheme: str, hyps: Sequence[str], refs: Sequence[str], ref_tok: Sequence[str] | None, lang: str
) -> dict[str, Any]:
    # the split is already in both views: tokenized_bleu only counts
    result = tokenized_bleu(hypothesis_view(scheme, hyps, lang), reference_view(scheme, refs, ref_tok, lang))
    result["signature"] = (
        result["signature"]
        .replace("tok:none(pre-tokenized)", f"tok:moses-{lang}-no-a+unicode-punct({WHERE[scheme]})")
        .replace("compound-split:no", f"compound-split:{scheme}")
    )
    return result


# The registry's entry points (pipeline_lib.evaluate.metric_registry).
def score_t2t(inputs: ScoreInputs) -> dict[str, Any]:
    return score("t2t", inputs.hyps, inputs.refs, inputs.ref_tok, inputs.moses_lang or "")


def score_wang(inputs: ScoreInputs) -> dict[str, Any]:
    return score("wang", inputs.hyps, inputs.refs, inputs.ref_tok, inputs.moses_lang or "")
