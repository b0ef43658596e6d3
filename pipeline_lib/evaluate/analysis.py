"""Fine-grained analysis of the paper's Figure 3, following compare-mt's definitions.

- Word accuracy by training frequency (compare-mt ``--compare_word_accuracies``, ``FreqWordBucketer``):
  every reference and output token is put in the bucket of its frequency in the training target
  corpus; in each sentence an output token matches an unused reference token of the same word (so a
  word's matches are min(count in output, count in reference)); per bucket
  recall = matched / reference tokens, precision = matched / output tokens, F = 2PR / (P + R),
  and 0 when nothing matched.
- BLEU by sentence length (compare-mt ``LengthSentenceBucketer``): segments are grouped by the length
  (in tokens) of the source or reference, and corpus BLEU (sacrebleu) is computed in each group.

Buckets are half-open ranges [low, high) of a list of cutoffs, as in compare-mt.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

FREQ_CUTOFFS = (1, 2, 3, 4, 5, 10, 100, 1000)  # compare-mt's defaults
LENGTH_CUTOFFS = (10, 20, 30, 40, 50, 60)


@dataclass(frozen=True)
class Bucket:
    label: str
    low: int  # inclusive
    high: int | None  # exclusive; None = unbounded

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "low": self.low, "high": self.high}


def make_buckets(cutoffs: Sequence[int]) -> list[Bucket]:
    """[0, c0), [c0, c1), ..., [c_last, inf) labelled "0", "1", "5-9", "1000+" and so on."""
    if not cutoffs or any(c <= 0 for c in cutoffs) or list(cutoffs) != sorted(set(cutoffs)):
        raise ValueError(f"cutoffs must be positive and strictly increasing, got {list(cutoffs)}")
    bounds = [0, *cutoffs]
    buckets = []
    for low, high in zip(bounds, bounds[1:], strict=False):
        label = str(low) if high == low + 1 else f"{low}-{high - 1}"
        buckets.append(Bucket(label, low, high))
    buckets.append(Bucket(f"{cutoffs[-1]}+", cutoffs[-1], None))
    return buckets


def bucket_index(value: int, cutoffs: Sequence[int]) -> int:
    return bisect.bisect_right(cutoffs, value)


def get_tokenizer(name: str, lowercase: bool = False) -> Callable[[str], list[str]]:
    """'none': the text is already tokenized (split on whitespace); '13a': sacrebleu's 13a tokenizer."""
    if name == "none":
        base: Callable[[str], str] = lambda s: s  # noqa: E731
    elif name == "13a":
        base = Tokenizer13a()
    else:
        raise ValueError(f"unknown tokenizer {name!r}")
    if lowercase:
        return lambda s: base(s).lower().split()
    return lambda s: base(s).split()


def count_frequencies(token_lists: Iterable[list[str]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for tokens in token_lists:
        counts.update(tokens)
    return counts


def word_accuracy_by_frequency(
    hyps: Sequence[list[str]],
    refs: Sequence[list[str]],
    freqs: Counter[str] | dict[str, int],
    cutoffs: Sequence[int] = FREQ_CUTOFFS,
) -> list[dict[str, Any]]:
    buckets = make_buckets(cutoffs)
    matched = [0] * len(buckets)
    ref_count = [0] * len(buckets)
    out_count = [0] * len(buckets)

    def bucket_of(word: str) -> int:
        return bucket_index(freqs.get(word, 0), cutoffs)

    for hyp, ref in zip(hyps, refs, strict=True):
        hyp_counts, ref_counts = Counter(hyp), Counter(ref)
        for word, n in hyp_counts.items():
            b = bucket_of(word)
            out_count[b] += n
            matched[b] += min(n, ref_counts.get(word, 0))
        for word, n in ref_counts.items():
            ref_count[bucket_of(word)] += n
    rows = []
    for b, bucket in enumerate(buckets):
        if matched[b] == 0:
            recall = precision = f_measure = 0.0
        else:
            recall = matched[b] / ref_count[b]
            precision = matched[b] / out_count[b]
            f_measure = 2 * precision * recall / (precision + recall)
        rows.append(
            {
                "bucket": bucket.label,
                "matched": matched[b],
                "ref_count": ref_count[b],
                "out_count": out_count[b],
                "recall": recall,
                "precision": precision,
                "f_measure": f_measure,
            }
        )
    return rows


def bleu_by_length(
    hyps: Sequence[str],
    refs: Sequence[str],
    lengths: Sequence[int],
    cutoffs: Sequence[int] = LENGTH_CUTOFFS,
    *,
    tokenize: str = "13a",
    lowercase: bool = False,
) -> tuple[list[dict[str, Any]], str]:
    """Corpus BLEU of the segments in each length bucket; an empty bucket has bleu None."""
    buckets = make_buckets(cutoffs)
    members: list[list[int]] = [[] for _ in buckets]
    for i, length in enumerate(lengths):
        members[bucket_index(length, cutoffs)].append(i)
    metric = BLEU(tokenize=tokenize, lowercase=lowercase, force=tokenize == "none")
    rows = []
    for bucket, idx in zip(buckets, members, strict=True):
        row: dict[str, Any] = {"bucket": bucket.label, "n_segments": len(idx)}
        if idx:
            score = metric.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]])
            row.update(bleu=score.score, sys_len=int(score.sys_len), ref_len=int(score.ref_len))
        else:
            row.update(bleu=None, sys_len=0, ref_len=0)
        rows.append(row)
    return rows, metric.get_signature().format()
