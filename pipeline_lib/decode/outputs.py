"""What the translate stage writes, all in input order, n-best lists as consecutive lines.

* text (``--output``): subwords removed and, when the data was Moses-tokenized, detokenized:
  what sacreBLEU scores. ``nbest`` lines per input sentence.
* subword text (``--output-subword``): the raw hypotheses, as the model produced them.
* fairseq-generate-like (``--output-generate``): ``S-i``/``T-i`` (subword source/reference),
  then per hypothesis ``H-i<TAB>score<TAB>subwords``, ``D-i<TAB>score<TAB>text`` and
  ``P-i<TAB>positional scores``. As fairseq prints them, these scores are in **base 2**.
* JSONL (``--output-jsonl``): one object per input sentence, scores in natural log:
  ``{"id", "source", "reference"?, "nbest": [{"tokens", "text", "score", "logprob", "length",
  "positional_scores"}]}``; ``score`` is length-normalised (``logprob / length ** lenpen``),
  ``length`` counts the final ``</s>``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data.detok import moses_detokenize, postprocess_subwords
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.search import Hypothesis

LN2 = math.log(2)


@dataclass(frozen=True)
class Postprocess:
    subword: str  # bpe | spm | none
    moses_lang: str | None  # None: no Moses detokenization

    def apply(self, lines: list[str]) -> list[str]:
        words = [postprocess_subwords(line, self.subword) for line in lines]
        return moses_detokenize(words, self.moses_lang) if self.moses_lang else words


@dataclass
class Rendered:
    subword: list[list[str]]  # per sentence, per hypothesis
    text: list[list[str]]


def render(hyps: list[list[Hypothesis]], vocab: Vocabulary, post: Postprocess) -> Rendered:
    subword = [[vocab.string(h.tokens) for h in nbest] for nbest in hyps]
    flat = post.apply([s for nbest in subword for s in nbest])
    text, pos = [], 0
    for nbest in subword:
        text.append(flat[pos : pos + len(nbest)])
        pos += len(nbest)
    return Rendered(subword, text)


@contextmanager
def _open(group: AtomicGroup, path: str) -> Iterator[IO[str]]:
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with open(group.tmp_for(Path(path)), "w", encoding="utf-8", newline="\n") as handle:
        yield handle


def _fmt(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else str(x)


def write_outputs(
    hyps: list[list[Hypothesis]],
    rendered: Rendered,
    sources: list[str],
    references: list[str] | None,
    *,
    output: str,
    output_subword: str | None = None,
    output_generate: str | None = None,
    output_jsonl: str | None = None,
) -> None:
    """Write every requested file as a tmp file; all are renamed into place together at the end."""
    with AtomicGroup() as group:
        with _open(group, output) as f:
            for nbest in rendered.text:
                f.writelines(line + "\n" for line in nbest)
        if output_subword:
            with _open(group, output_subword) as f:
                for nbest in rendered.subword:
                    f.writelines(line + "\n" for line in nbest)
        if output_generate:
            with _open(group, output_generate) as f:
                for i, nbest in enumerate(hyps):
                    f.write(f"S-{i}\t{sources[i]}\n")
                    if references is not None:
                        f.write(f"T-{i}\t{references[i]}\n")
                    for h, sub, txt in zip(nbest, rendered.subword[i], rendered.text[i], strict=True):
                        score = _fmt(h.score / LN2)
                        f.write(f"H-{i}\t{score}\t{sub}\n")
                        f.write(f"D-{i}\t{score}\t{txt}\n")
                        f.write(f"P-{i}\t{' '.join(_fmt(p / LN2) for p in h.positional_scores)}\n")
        if output_jsonl:
            with _open(group, output_jsonl) as f:
                for i, nbest in enumerate(hyps):
                    record: dict = {"id": i, "source": sources[i]}
                    if references is not None:
                        record["reference"] = references[i]
                    record["nbest"] = [
                        {
                            "tokens": sub,
                            "text": txt,
                            "score": h.score,
                            "logprob": h.logprob,
                            "length": len(h.tokens) + 1,
                            "positional_scores": h.positional_scores,
                        }
                        for h, sub, txt in zip(nbest, rendered.subword[i], rendered.text[i], strict=True)
                    ]
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
