"""METEOR with NLTK's aligner, aggregated at corpus level like the Meteor jar's "Final score".

NLTK's ``meteor_score`` is sentence-level and English-only as it comes (Porter stemmer, English
WordNet). Here the stem module uses the Snowball stemmer of the target language, as Meteor 1.5 does
(NLTK ships Snowball for French, German and 13 more languages); a language without one aligns on exact
matches only. WordNet is English, so the synonym module runs only for English, and only when its data
is already installed (it cannot be downloaded on offline machines). The modules actually used are in
the result and its signature, because the settings are not comparable.

The corpus score sums the sufficient statistics (matches, chunks, hypothesis and reference lengths)
over all segments and applies the Lavie & Agarwal (2007) formula once, as Meteor 1.x does for its
system-level score. This is *not* Meteor 1.5 (no paraphrase tables, no function-word weighting, one weight for
every module, NLTK's parameters alpha=0.9 beta=3 gamma=0.5 instead of Meteor 1.5's tuned per-language
ones), so numbers are not comparable with a paper's Meteor 1.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import nltk
from nltk.stem.snowball import SnowballStemmer
from nltk.translate import meteor_score as nltk_meteor
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from pipeline_lib.evaluate.metric_registry import ScoreInputs

ALPHA, BETA, GAMMA = 0.9, 3.0, 0.5  # NLTK defaults (Lavie & Agarwal 2007)

# ISO 639-1 code -> NLTK's Snowball stemmer of that language
SNOWBALL = {
    "ar": "arabic", "da": "danish", "de": "german", "en": "english", "es": "spanish", "fi": "finnish",
    "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch", "no": "norwegian", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sv": "swedish",
}  # fmt: skip


class _NoStemmer:
    """Stands in for a stemmer where the language has none: a word's stem is the word."""

    def stem(self, word: str) -> str:
        return word


class _NoSynonyms:
    """Stands in for the WordNet reader when its data is missing: no synsets for any word."""

    def synsets(self, word: str) -> list:
        return []


def load_wordnet() -> Any | None:
    """NLTK's WordNet reader if its data is installed locally, else None (never downloads)."""
    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
        wordnet.synsets("dog")
        return wordnet
    except (LookupError, OSError):
        return None


@dataclass
class MeteorStats:
    hyp_len: int = 0
    ref_len: int = 0
    matches: int = 0
    chunks: int = 0

    def score(self) -> float:
        if self.matches == 0 or self.hyp_len == 0 or self.ref_len == 0:
            return 0.0
        precision = self.matches / self.hyp_len
        recall = self.matches / self.ref_len
        fmean = precision * recall / (ALPHA * precision + (1 - ALPHA) * recall)
        penalty = GAMMA * (self.chunks / self.matches) ** BETA
        return (1 - penalty) * fmean


def segment_stats(hyp_tokens: list[str], ref_tokens: list[str], stemmer, wordnet) -> MeteorStats:
    # align_words lower-cases (its default preprocess) then matches exact -> stem -> synonyms
    matches, _, _ = nltk_meteor.align_words(hyp_tokens, ref_tokens, stemmer=stemmer, wordnet=wordnet)
    chunks = nltk_meteor._count_chunks(matches) if matches else 0
    return MeteorStats(len(hyp_tokens), len(ref_tokens), len(matches), chunks)


def meteor(
    hyps: Sequence[str], refs: Sequence[str], *, lang: str, use_wordnet: bool = True
) -> dict[str, Any]:
    """Corpus METEOR (x100) on detokenized ``lang`` text; tokenised with sacrebleu's 13a, lower-cased."""
    tokenize = Tokenizer13a()
    stemmer_name = SNOWBALL.get(lang)
    stemmer = SnowballStemmer(stemmer_name) if stemmer_name else _NoStemmer()
    wordnet = load_wordnet() if use_wordnet and lang == "en" else None
    modules = ["exact"] + (["stem"] if stemmer_name else []) + (["synonym"] if wordnet is not None else [])
    total = MeteorStats()
    segment_scores = []
    for hyp, ref in zip(hyps, refs, strict=True):
        s = segment_stats(tokenize(hyp).split(), tokenize(ref).split(), stemmer, wordnet or _NoSynonyms())
        segment_scores.append(s.score())
        total.hyp_len += s.hyp_len
        total.ref_len += s.ref_len
        total.matches += s.matches
        total.chunks += s.chunks
    mean = sum(segment_scores) / len(segment_scores) if segment_scores else 0.0
    signature = (
        f"nltk-meteor|lang:{lang}|modules:{'+'.join(modules)}|stemmer:snowball-{stemmer_name or 'none'}"
        f"|case:lc|tok:13a|alpha:{ALPHA}|beta:{BETA}|gamma:{GAMMA}"
        f"|agg:corpus-stats|version:nltk-{nltk.__version__}"
    )
    return {
        "score": 100.0 * total.score(),
        "lang": lang,
        "stemmer": f"snowball-{stemmer_name}" if stemmer_name else None,
        "segment_mean": 100.0 * mean,
        "modules": modules,
        "wordnet_available": wordnet is not None,
        "matches": total.matches,
        "chunks": total.chunks,
        "hyp_len": total.hyp_len,
        "ref_len": total.ref_len,
        "signature": signature,
    }


def score_meteor(inputs: ScoreInputs) -> dict[str, Any]:
    """The registry's entry point (pipeline_lib.evaluate.metric_registry)."""
    return meteor(inputs.hyps, inputs.refs, lang=inputs.lang or "", use_wordnet=inputs.use_wordnet)
