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

import contextlib
import json
import math
import sys
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


def _fmt(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else str(x)


class OutputWriter:
    """Every requested output file, written chunk by chunk into tmp files that are renamed into place
    together when the writer closes without error (a failed or killed run leaves no partial file)."""

    def __init__(
        self,
        *,
        output: str,
        output_subword: str | None = None,
        output_generate: str | None = None,
        output_jsonl: str | None = None,
    ) -> None:
        self._group = AtomicGroup()
        self._files: dict[str, IO[str]] = {}
        self._stack = contextlib.ExitStack()
        self._paths = {
            "text": output,
            "subword": output_subword,
            "generate": output_generate,
            "jsonl": output_jsonl,
        }

    def __enter__(self) -> OutputWriter:
        self._stack.enter_context(self._group)
        for kind, path in self._paths.items():
            if path == "-":
                self._files[kind] = sys.stdout
            elif path:
                handle = open(self._group.tmp_for(Path(path)), "w", encoding="utf-8", newline="\n")  # noqa: SIM115
                self._files[kind] = self._stack.enter_context(handle)
        return self

    def __exit__(self, *exc_info: object) -> bool | None:
        sys.stdout.flush()
        return self._stack.__exit__(*exc_info)

    def write(
        self,
        hyps: list[list[Hypothesis]],
        rendered: Rendered,
        sources: list[str],
        references: list[str] | None,
        first_id: int = 0,
    ) -> None:
        """One chunk of sentences, numbered from ``first_id`` in the generate and JSONL outputs."""
        files = self._files
        for nbest in rendered.text:
            files["text"].writelines(line + "\n" for line in nbest)
        if "subword" in files:
            for nbest in rendered.subword:
                files["subword"].writelines(line + "\n" for line in nbest)
        if "generate" in files:
            f = files["generate"]
            for k, nbest in enumerate(hyps):
                i = first_id + k
                f.write(f"S-{i}\t{sources[k]}\n")
                if references is not None:
                    f.write(f"T-{i}\t{references[k]}\n")
                for h, sub, txt in zip(nbest, rendered.subword[k], rendered.text[k], strict=True):
                    score = _fmt(h.score / LN2)
                    f.write(f"H-{i}\t{score}\t{sub}\n")
                    f.write(f"D-{i}\t{score}\t{txt}\n")
                    f.write(f"P-{i}\t{' '.join(_fmt(p / LN2) for p in h.positional_scores)}\n")
        if "jsonl" in files:
            for k, nbest in enumerate(hyps):
                record: dict = {"id": first_id + k, "source": sources[k]}
                if references is not None:
                    record["reference"] = references[k]
                record["nbest"] = [
                    {
                        "tokens": sub,
                        "text": txt,
                        "score": h.score,
                        "logprob": h.logprob,
                        "length": len(h.tokens) + 1,
                        "positional_scores": h.positional_scores,
                    }
                    for h, sub, txt in zip(nbest, rendered.subword[k], rendered.text[k], strict=True)
                ]
                files["jsonl"].write(json.dumps(record, ensure_ascii=False) + "\n")
