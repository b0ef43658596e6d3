"""Tokenized BLEU as ``fairseq-generate --remove-bpe`` prints it (its ``BLEU4`` line).

The number the deep-Transformer papers report (deepnmt ``nmt_eval/eval_enfr.sh``, Transformer-Clinic
``nmt-experiments/eval_*.sh``) is the ``BLEU4`` line of fairseq-generate. fairseq (0.8.0 as
Transformer-Clinic ships it; 0.12 the same) computes it as follows (Transformer-Clinic @70f72b7,
``fairseq/generate.py:121-180``, ``fairseq/fairseq/bleu.py:61-129``,
``fairseq/fairseq/clib/libbleu/libbleu.cpp:28-130``, ``fairseq/fairseq/data/dictionary.py:63-88``):

* the hypothesis is the model's own subword tokens with ``@@ `` removed (never detokenized);
* the reference is the *binarized* target read back through the dictionary: an out-of-vocabulary
  subword is ``<<unk>>`` (``escape_unk=True``) before ``@@ `` is removed, so ``foo@@ <<unk>>`` is one
  word ``foo<<unk>>``;
* both strings are split on whitespace and re-encoded with a growing dictionary, i.e. tokens match
  when their strings are equal, except that a reference token ``<unk>`` (the dictionary's unknown
  id) never matches (``rref[rref.eq(unk)] = -999``) and a hypothesis ``<unk>`` cannot match the
  reference's ``<<unk>>``;
* each side gets ``</s>`` appended, leading ``<pad>`` and trailing ``</s>``/``<pad>`` are trimmed but
  never the first token: an empty line counts as one token, ``</s>``;
* corpus counts of clipped n-gram matches (n = 1..4), no smoothing (a zero precision gives 0),
  brevity ``min(1, exp(1 - reflen / predlen))``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline_lib.data.detok import postprocess_subwords
from pipeline_lib.errors import InputError

UNK, ESCAPED_UNK = "<unk>", "<<unk>>"
PAD, EOS = "<pad>", "</s>"
_NEVER = object()  # what fairseq's -999 is: a reference token that equals nothing
_SPACE = re.compile(r"\s+")  # fairseq.tokenizer.tokenize_line
ORDER = 4


def words(line: str) -> list[str]:
    """``fairseq.tokenizer.tokenize_line``."""
    return _SPACE.sub(" ", line).strip().split()


def reference_string(subwords: str, subword: str) -> str:
    """The ``T-`` line fairseq-generate prints for a binarized reference read back as ``<unk>`` per
    unknown id: unknowns escaped, then subwords removed (``tgt_dict.string(..., escape_unk=True)``)."""
    escaped = " ".join(ESCAPED_UNK if w == UNK else w for w in subwords.split(" ") if w)
    return postprocess_subwords(escaped, subword)


def _trimmed(tokens: list[Any]) -> list[Any]:
    """libbleu's bleu_trim on ``tokens + [</s>]``: leading pads, then trailing ``</s>``/pads but never
    position 0."""
    seq = [*tokens, EOS]
    start = 0
    while start < len(seq) and seq[start] == PAD:
        start += 1
    seq = seq[start:]
    if not seq:  # all padding: libbleu's size_t wraps here; fairseq never produces it
        return []
    end = len(seq) - 1
    while end > 0 and seq[end] in (EOS, PAD):
        end -= 1
    return seq[: end + 1]


def fairseq_tokens(hyp: str, ref: str) -> tuple[list[Any], list[Any]]:
    """Both sides as libbleu compares them: hypothesis strings, reference strings with ``<unk>``
    replaced by a token that equals nothing."""
    ref_tokens = [_NEVER if w == UNK else w for w in words(ref)]
    return _trimmed(words(hyp)), _trimmed(ref_tokens)


@dataclass
class BleuStats:
    """libbleu's bleu_stat."""

    reflen: int = 0
    predlen: int = 0
    match: list[int] = field(default_factory=lambda: [0] * ORDER)
    count: list[int] = field(default_factory=lambda: [0] * ORDER)

    def add(self, hyp: str, ref: str) -> None:
        pred, reference = fairseq_tokens(hyp, ref)
        self.reflen += len(reference)
        self.predlen += len(pred)
        for n in range(1, ORDER + 1):
            if len(pred) < n:
                continue
            pred_ngrams = Counter(tuple(pred[i : i + n]) for i in range(len(pred) - n + 1))
            self.count[n - 1] += len(pred) - n + 1
            for i in range(len(reference) - n + 1):
                gram = tuple(reference[i : i + n])
                if pred_ngrams[gram] > 0:  # _NEVER is its own object: equal to no hypothesis token
                    self.match[n - 1] += 1
                    pred_ngrams[gram] -= 1

    def precisions(self) -> list[float]:
        return [m / c if c > 0 else 0.0 for m, c in zip(self.match, self.count, strict=True)]

    def brevity(self) -> float:
        return min(1.0, math.exp(1 - self.reflen / self.predlen)) if self.predlen else 0.0

    def score(self) -> float:
        precisions = self.precisions()
        if min(precisions) <= 0:
            return 0.0
        return self.brevity() * math.exp(sum(math.log(p) for p in precisions) / ORDER) * 100

    def result_string(self) -> str:
        """fairseq's ``Scorer.result_string()``: the line after ``Generate test with beam=N:``."""
        p = "/".join(f"{100 * x:2.1f}" for x in self.precisions())
        ratio = self.predlen / self.reflen if self.reflen else 0.0
        return (
            f"BLEU4 = {self.score():2.2f}, {p} (BP={self.brevity():.3f}, ratio={ratio:.3f}, "
            f"syslen={self.predlen}, reflen={self.reflen})"
        )


def fairseq_bleu(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """BLEU4 of fairseq-generate on already subword-removed hypothesis and reference (``T-``) lines."""
    stats = BleuStats()
    for hyp, ref in zip(hyps, refs, strict=True):
        stats.add(hyp, ref)
    return {
        "score": stats.score(),
        "precisions": [100 * p for p in stats.precisions()],
        "bp": stats.brevity(),
        "ratio": stats.predlen / stats.reflen if stats.reflen else 0.0,
        "sys_len": stats.predlen,
        "ref_len": stats.reflen,
        "fairseq": stats.result_string(),
    }


def paired_view(hyps: Sequence[str], refs: Sequence[str]) -> tuple[list[str], list[str]]:
    """The same comparison as whitespace-token strings, so that sacrebleu's tokenize='none',
    smooth='none' BLEU (the paired bootstrap) counts exactly what :class:`BleuStats` counts: the
    trimmed tokens, an empty line as ``</s>``, a reference ``<unk>`` as a token no hypothesis has."""
    never = "<unk-never-matches>"
    out_h, out_r = [], []
    for hyp, ref in zip(hyps, refs, strict=True):
        pred, reference = fairseq_tokens(hyp, ref)
        out_h.append(" ".join(never + "-h" if t == never else t for t in pred))
        out_r.append(" ".join(never if t is _NEVER else t for t in reference))
    return out_h, out_r


@dataclass(frozen=True)
class GenerateFile:
    """The top hypothesis and the reference of every sentence of a generate file, subwords removed."""

    path: str
    hyps: list[str]
    refs: list[str]


def read_generate(path: str | Path, subword: str) -> GenerateFile:
    """Read ``translate --output-generate`` (fairseq-generate's S/T/H/D/P lines, subword H and T, as
    translate writes them for a binarized split): per sentence id its first ``H-`` line and its ``T-``
    line, in id order. Every id 0..n-1 needs both."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: invalid UTF-8 at byte {exc.start}") from exc
    hyps: dict[int, str] = {}
    refs: dict[int, str] = {}
    for lineno, line in enumerate(text.split("\n"), start=1):
        kind, _, rest = line.partition("-")
        if kind not in ("H", "T"):
            continue
        sid, _, payload = rest.partition("\t")
        if not sid.isdigit():
            raise InputError(f"{path}:{lineno}: expected {kind}-<id><TAB>..., got {line[:60]!r}")
        i = int(sid)
        if kind == "T":
            refs[i] = payload
        elif i not in hyps:  # the n-best list's first hypothesis is the one fairseq scores
            _score, tab, subwords = payload.partition("\t")
            if not tab:
                raise InputError(f"{path}:{lineno}: H line without score<TAB>hypothesis")
            hyps[i] = subwords
    n = len(hyps)
    if n == 0:
        raise InputError(f"{path}: no H- lines (not a generate file?)")
    for name, got in (("H", hyps), ("T", refs)):
        missing = [i for i in range(n) if i not in got]
        if missing or len(got) != n:
            what = (
                f"no {name}-{missing[0]} line" if missing else f"{len(got)} {name} lines for {n} hypotheses"
            )
            raise InputError(
                f"{path}: {what} (the reference comes from a binarized split: translate --data-dir --split)"
            )
    return GenerateFile(
        str(path),
        [postprocess_subwords(hyps[i], subword) for i in range(n)],
        [reference_string(refs[i], subword) for i in range(n)],
    )


def score_fairseq_bleu(inputs: Any) -> dict[str, Any]:
    """The registry's entry point (``tok_bleu``): ``inputs.generate`` is the GenerateFile of --generate."""
    gen = inputs.generate
    if gen is None:
        raise ValueError("tok_bleu needs --generate (score checks this before computing)")
    signature = "fairseq-generate BLEU4|remove-bpe|ref:binarized(<<unk>>)|smooth:none"
    return {**fairseq_bleu(gen.hyps, gen.refs), "signature": signature, "generate": gen.path}
