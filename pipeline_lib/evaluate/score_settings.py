"""The ``score`` stage's settings, light enough for the workflow schema to read the field marked
``evaluation`` (the config's ``evaluation.metrics``, checked against the metric registry)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline_lib.dataclass_cli import option
from pipeline_lib.evaluate.metric_registry import compound_split_metrics, metric_names
from pipeline_lib.lang_code import lang_code

GENERATE_GROUP = "tokenized BLEU as fairseq-generate --remove-bpe prints it (tok_bleu)"
RETOKENIZED_GROUP = "re-tokenized BLEU (tok_bleu_retok, multi-bleu.perl convention)"


@dataclass(frozen=True, kw_only=True)
class ScoreSettings:
    """The flags of ``score`` (its --skip-if-diverged is the placeholders' own)."""

    hyp: str = option(help="detokenized hypothesis, one segment per line (UTF-8)")
    ref: str = option(help="detokenized reference, same number of lines")
    output: str = option(help="JSON file to write (atomically)", aliases=("-o",))
    system: str | None = option(None, "system name stored in the JSON (default: hypothesis file stem)")
    metrics: tuple[str, ...] = option(
        (),
        "metrics to compute (default: all but the compound-split ones; tok_bleu only when tokenized "
        "inputs are available)",
        choices=metric_names,
        nargs="+",
        evaluation=True,
        config_default=None,  # a config without the key scores the default set
        doc="the metrics every run is scored with (default: all but the compound-split ones)",
    )
    generate: str | None = option(
        None,
        "translate's --output-generate file of a binarized split: its first H line per sentence (the "
        "model's subwords) against its T line (the binarized reference, unknown words as <<unk>>)",
        group=GENERATE_GROUP,
    )
    subword: str = option(
        "bpe",
        "how subwords are removed from H and T lines (bpe: fairseq's --remove-bpe '@@ '; default bpe)",
        choices=("bpe", "spm", "none"),
        group=GENERATE_GROUP,
    )
    hyp_tok: str | None = option(None, "Moses-tokenized hypothesis (BPE removed)", group=RETOKENIZED_GROUP)
    ref_tok: str | None = option(None, "Moses-tokenized reference", group=RETOKENIZED_GROUP)
    ref_tok_meta: str | None = option(
        None,
        "preprocess's meta.json beside --ref-tok: the hypothesis is tokenized as it records the "
        "reference's split was (needed with --ref-tok and --moses-lang)",
        group=RETOKENIZED_GROUP,
    )
    moses_lang: str | None = option(
        None,
        "tokenize whichever of --hyp-tok/--ref-tok is missing from the detokenized file as fairseq's "
        "prepare-wmt14 scripts tokenize test (sed s/’/'/g, tokenizer.perl -a; no normalization)",
        type=lang_code,
        group=RETOKENIZED_GROUP,
    )
    compound_split: tuple[str, ...] = option(
        (),
        "also score tok_bleu_<scheme>: an En-De eval script's own tokenization of both detokenized "
        "sides, then s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g (t2t: get_ende_bleu.sh; wang: dlcl's "
        "wmt_en2de_google_multi_bleu.sh, from --ref-tok). tok_bleu itself is never split",
        choices=lambda: sorted(compound_split_metrics().values()),
        nargs="+",
        group=RETOKENIZED_GROUP,
    )
    lang: str | None = option(
        None,
        "language of hypothesis and reference (ISO 639-1, e.g. fr; default: the reference file's "
        "suffix, as in test.fr); METEOR's Snowball stemmer is that language's, and its WordNet synonym "
        "module runs only for en",
        type=lang_code,
    )
    no_wordnet: bool = option(
        False, "METEOR without the WordNet synonym module even if WordNet data is installed"
    )
