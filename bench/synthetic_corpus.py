"""A synthetic parallel corpus with WMT-like sentence lengths and vocabulary growth, for scale benchmarks.

The point is cost, not meaning: every data stage's time and memory depend on how many lines and
tokens there are, how long lines are, and how many word types turn up as the corpus grows (BPE
learning and vocabulary counting grow with the types). The assumptions, stated so that the
extrapolations built on them can be judged:

- source length in words ~ lognormal, median 22, sigma 0.6, clipped to [1, 400] (WMT'14 En-Fr
  train has a median near 22 words and a long tail; a few lines are over 250 and get cleaned);
- target length = source length x lognormal(median 1.15, sigma 0.15) (French runs ~15% longer),
  and 1% of pairs get an unrelated length, so that ratio cleaning has work to do;
- words: 97% from a Zipf(1.0) head over a 60k-word lexicon per language, 3% from an unbounded
  Zipf(1.6) tail (names, numbers, rare forms), which gives Heaps-law type growth (types ~ N^0.6);
- the French side has accented letters, elisions (l'…) and hyphens, the English side hyphens and
  numbers with separators, and both have punctuation, so Moses normalization and ``-a`` tokenization
  do their usual work.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HEAD_LEXICON = 60_000
TAIL_SHARE = 0.03
CHUNK_PAIRS = 20_000

_LETTERS = {
    "en": ("bcdfghklmnprstvwz", "aeiouy"),
    "fr": ("bcdfghjlmnpqrstvz", "aeiouéèàâêîôû"),
}
_PUNCT = (",", ".", "?", "!", ";", ":", '"', "(", ")")


def _word(lang: str, rank: int) -> str:
    """A pronounceable, deterministic word for a rank (one per rank and language)."""
    consonants, vowels = _LETTERS[lang]
    out = []
    n = rank + 1
    while n:
        n, c = divmod(n, len(consonants))
        n, v = divmod(n, len(vowels))
        out.append(consonants[c] + vowels[v])
    word = "".join(out)
    if rank % 97 == 3:
        word = word + "-" + _word(lang, rank // 97)  # hyphenated compounds, split by -a
    if lang == "fr" and rank % 53 == 5:
        word = "l'" + word
    if lang == "en" and rank % 211 == 7:
        word = f"{rank % 9000 + 1000:,}"  # 1,234: a number Moses must keep together
    return word


class _Lexicon:
    def __init__(self, lang: str) -> None:
        self.lang = lang
        self.head = [_word(lang, r) for r in range(HEAD_LEXICON)]
        # Zipf(1.0) over the head: p(r) ~ 1/(r+1)
        weights = 1.0 / np.arange(1, HEAD_LEXICON + 1)
        self.head_cdf = np.cumsum(weights / weights.sum())
        self.tail: dict[int, str] = {}

    def words(self, rng: np.random.Generator, n: int) -> list[str]:
        head_idx = np.searchsorted(self.head_cdf, rng.random(n), side="right")
        head_idx = np.minimum(head_idx, HEAD_LEXICON - 1)
        is_tail = rng.random(n) < TAIL_SHARE
        tail_ranks = rng.zipf(1.6, size=int(is_tail.sum())) + HEAD_LEXICON
        out = [self.head[i] for i in head_idx]
        for pos, rank in zip(np.flatnonzero(is_tail), tail_ranks, strict=True):
            rank = int(min(rank, 2**40))
            word = self.tail.get(rank)
            if word is None:
                word = _word(self.lang, rank)
                if len(self.tail) < 2_000_000:  # a cache, not a requirement
                    self.tail[rank] = word
            out[pos] = word
        return out


def _sentences(lex: _Lexicon, rng: np.random.Generator, lengths: np.ndarray) -> list[str]:
    words = lex.words(rng, int(lengths.sum()))
    punct = rng.random(len(words)) < 0.08
    punct_kind = rng.integers(0, len(_PUNCT), size=len(words))
    out, start = [], 0
    for length in lengths:
        toks = words[start : start + length]
        for k in range(start, start + length):
            if punct[k]:
                toks[k - start] = toks[k - start] + _PUNCT[punct_kind[k]]
        sent = " ".join(toks)
        out.append(sent[:1].upper() + sent[1:] + ".")
        start += length
    return out


def write_corpus(out_dir: Path, pairs: int, src: str = "en", tgt: str = "fr", seed: int = 1) -> None:
    """``train.{src}``/``train.{tgt}`` with ``pairs`` lines each, reproducible from ``seed``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    lex = {src: _Lexicon("en"), tgt: _Lexicon("fr")}
    with (
        open(out_dir / f"train.{src}", "w", encoding="utf-8") as fs,
        open(out_dir / f"train.{tgt}", "w", encoding="utf-8") as ft,
    ):
        for start in range(0, pairs, CHUNK_PAIRS):
            n = min(CHUNK_PAIRS, pairs - start)
            src_len = np.clip(np.rint(rng.lognormal(np.log(22), 0.6, n)), 1, 400).astype(int)
            ratio = rng.lognormal(np.log(1.15), 0.15, n)
            tgt_len = np.clip(np.rint(src_len * ratio), 1, 400).astype(int)
            unrelated = rng.random(n) < 0.01
            tgt_len[unrelated] = rng.integers(1, 120, size=int(unrelated.sum()))
            for line in _sentences(lex[src], rng, src_len):
                fs.write(line + "\n")
            for line in _sentences(lex[tgt], rng, tgt_len):
                ft.write(line + "\n")
