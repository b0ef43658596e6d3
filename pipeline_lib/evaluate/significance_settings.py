"""The ``significance`` stage's settings, light enough for the workflow schema to read the fields
marked ``evaluation`` (the paired bootstrap's keys of the config's ``evaluation:`` block)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.dataclass_cli import option
from pipeline_lib.evaluate.metric_registry import metric_spec, testable_names


def named_path(spec: str) -> tuple[str, str]:
    """'NAME=PATH' or 'PATH' (name = file stem)."""
    if "=" in spec:
        name, path = spec.split("=", 1)
        if not name or not path:
            raise argparse.ArgumentTypeError(f"expected NAME=PATH or PATH, got {spec!r}")
        return name, path
    return Path(spec).stem, spec


_GENERATED = ", ".join(m for m in testable_names() if metric_spec(m).generate)
_TOKENIZED = ", ".join(m for m in testable_names() if metric_spec(m).tokenized)
GENERATE_GROUP = f"fairseq-generate BLEU (--metrics {_GENERATED})"
TOKENIZED_GROUP = f"tokenized BLEU (--metrics {_TOKENIZED})"


@dataclass(frozen=True)
class SignificanceSettings:
    """The flags of ``significance``; the fields marked ``evaluation`` are keys of the workflow config's
    ``evaluation:`` block (under the names the config gives them), passed as these flags."""

    ref: str = option(help="detokenized reference (UTF-8, one segment per line)")
    baseline: tuple[str, str] = option(help="[NAME=]FILE of the baseline system", type=named_path)
    systems: tuple[tuple[str, str], ...] = option(
        help="[NAME=]FILE of each compared system", type=named_path, nargs="+"
    )
    output: str = option(help="JSON file to write (atomically)", aliases=("-o",))
    markdown: str | None = option(None, "also write the pairwise matrix (Table 3 layout) as markdown here")
    metrics: tuple[str, ...] = option(
        ("bleu",), "default: bleu", choices=lambda: sorted(testable_names()), nargs="+"
    )
    generate: tuple[tuple[str, str], ...] = option(
        (),
        "NAME=FILE: translate's --output-generate file of the baseline and of every system (their "
        "H lines against the binarized reference's T lines, as fairseq-generate scores)",
        type=named_path,
        nargs="+",
        group=GENERATE_GROUP,
    )
    subword: str = option("bpe", "default: bpe", choices=("bpe", "spm", "none"), group=GENERATE_GROUP)
    ref_tok: str | None = option(
        None, "tokenized reference (default: tokenize --ref as below)", group=TOKENIZED_GROUP
    )
    ref_tok_meta: str | None = option(
        None,
        "preprocess's meta.json beside --ref-tok: hypotheses are tokenized as it records the "
        "reference's split was (needed with --ref-tok)",
        group=TOKENIZED_GROUP,
    )
    moses_lang: str | None = option(
        None,
        "target language: hypotheses are tokenized as --ref-tok-meta records the reference was "
        "(without --ref-tok, both sides as fairseq's prepare-wmt14 scripts tokenize test)",
        group=TOKENIZED_GROUP,
    )
    # The config's keys, in the order the workflow passes them.
    n_samples: int = option(
        1000, "bootstrap resamples (sacrebleu: 1000)", evaluation="bootstrap_samples", ge=1
    )
    seed: int = option(12345, "numpy seed, as SACREBLEU_SEED (default 12345)", evaluation="bootstrap_seed")
    alpha: float = option(0.05, "significance level for +/-/= (default 0.05)", evaluation=True, gt=0, lt=1)
    no_matrix: bool = option(False, "only compare each system with the baseline")
