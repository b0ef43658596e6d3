"""The metric registry: every metric's name, how the tables show it, which way is better, what it is
computed from, and the function that computes it.

The score and significance stages, the workflow's command lines, the config checks and the report
read this registry; nothing else lists metrics. Adding a metric is one :func:`register` call with a
``compute`` function (``ScoreInputs -> {"score": ..., "signature": ..., ...}``). Functions may be given
as ``"module:function"`` so that reading names and labels (the workflow, the report) imports neither
sacrebleu nor torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline_lib.errors import ConfigError
from pipeline_lib.named_registry import Lazy, Registry, resolve


@dataclass(frozen=True)
class ScoreInputs:
    """What `score` has read for one system; a metric takes what it needs."""

    hyps: list[str]  # detokenized hypothesis
    refs: list[str]  # detokenized reference
    lang: str | None = None  # target language (--lang or the reference's suffix)
    moses_lang: str | None = None  # --moses-lang
    ref_tok: list[str] | None = None  # --ref-tok's lines (the preprocessed reference)
    tokenized: tuple[list[str], list[str], dict[str, str]] | None = None  # (hyp_tok, ref_tok, sources)
    use_wordnet: bool = True
    generate: Any = None  # fairseq_bleu.GenerateFile of --generate: the model's tokens and the binarized ref


@dataclass(frozen=True)
class MetricSpec:
    name: str
    header: str  # the column header in results/tables.md, with its direction ("BLEU↑")
    compute: Lazy  # ScoreInputs -> dict with at least "score" and "signature"
    words: str | None = None  # the metric in a sentence ("tokenized BLEU"); None: its name
    definition: str | None = None  # in full, under Table 1 when it is the BLEU column
    higher_is_better: bool = True
    bleu: bool = False  # a BLEU: Table 1's BLEU column, a translation floor
    tokenized: bool = False  # scored on Moses-tokenized text: the workflow passes the tokenized reference
    pair: bool = False  # needs `score`'s tokenized pair (--hyp-tok/--ref-tok or --moses-lang)
    generate: bool = False  # reads translate's generate file (`score --generate`), as fairseq-generate scores
    compound_split: str | None = None  # the `score --compound-split` scheme that adds it
    needs_ref_tok: str | None = None  # why it reads --ref-tok (then it is required)
    needs_lang: str | None = None  # why it needs the target language (--lang)
    paired: Lazy | None = None  # refs -> sacrebleu metric for the paired bootstrap; None: not testable
    column: int | None = None  # its place among a comparison's default columns; None: not shown unless listed

    def score(self, inputs: ScoreInputs) -> dict[str, Any]:
        return resolve(self.compute)(inputs)

    def paired_metric(self, refs: Sequence[str]) -> Any:
        if self.paired is None:
            raise ConfigError(
                f"metrics: {self.name} has no paired bootstrap (choose from {testable_names()})"
            )
        return resolve(self.paired)(refs)

    @property
    def label(self) -> str:
        """The header without its direction arrow."""
        return self.header.rstrip("↑↓")


METRICS: Registry[MetricSpec] = Registry("metric", lambda spec: spec.name)
register, unregister, metric_spec = METRICS.register, METRICS.unregister, METRICS.spec


def metric_names() -> tuple[str, ...]:
    return tuple(METRICS)


def metric_header(name: str) -> str:
    spec = METRICS.get(name)
    return spec.header if spec else name


def metric_words(name: str) -> str:
    spec = METRICS.get(name)
    return spec.words or name if spec else name


def bleu_names() -> tuple[str, ...]:
    return tuple(n for n, s in METRICS.items() if s.bleu)


def testable_names() -> tuple[str, ...]:
    """The metrics the paired bootstrap (`significance`) can test."""
    return tuple(n for n, s in METRICS.items() if s.paired is not None)


def compound_split_metrics() -> dict[str, str]:
    """metric -> the `score --compound-split` scheme that adds it."""
    return {n: s.compound_split for n, s in METRICS.items() if s.compound_split}


def default_columns() -> list[str]:
    """A comparison's metric columns when it lists none, in their order."""
    shown = [s for s in METRICS.values() if s.column is not None]
    return [s.name for s in sorted(shown, key=lambda s: s.column)]


# Scores are computed (and written) in this order.
_M = "pipeline_lib.evaluate.metrics"
_CS = "pipeline_lib.evaluate.compound_split"
_P = "pipeline_lib.evaluate.significance"
_TOK = "tokenized BLEU"
register(MetricSpec("bleu", "sacreBLEU↑", f"{_M}:score_sacre_bleu", "sacreBLEU", bleu=True, paired=f"{_P}:paired_sacre_bleu", column=1))  # fmt: skip
register(MetricSpec("tok_bleu", "BLEU↑", "pipeline_lib.evaluate.fairseq_bleu:score_fairseq_bleu", _TOK, "tokenized BLEU as fairseq-generate --remove-bpe prints it (BLEU4: the model's own tokens against the binarized reference, unknown words as <<unk>>; no smoothing)", bleu=True, generate=True, paired=f"{_P}:paired_tokenized_bleu", column=0))  # fmt: skip
register(MetricSpec("tok_bleu_retok", "BLEU (re-tokenized)↑", f"{_M}:score_tokenized_bleu", f"{_TOK} (re-tokenized)", "multi-bleu.perl on the detokenized hypothesis re-tokenized as the reference was, against the preprocessed reference", bleu=True, tokenized=True, pair=True, paired=f"{_P}:paired_tokenized_bleu"))  # fmt: skip
register(MetricSpec("tok_bleu_t2t", "BLEU (t2t compound split)↑", f"{_CS}:score_t2t", f"{_TOK} (t2t compound split)", "tokenized BLEU, ##AT## compound split after tensor2tensor's get_ende_bleu.sh tokenization", bleu=True, tokenized=True, compound_split="t2t", paired=f"{_P}:paired_tokenized_bleu"))  # fmt: skip
register(MetricSpec("tok_bleu_wang", "BLEU (DLCL eval, compound split)↑", f"{_CS}:score_wang", f"{_TOK} (DLCL eval, compound split)", "tokenized BLEU, ##AT## compound split after dlcl's wmt_en2de_google_multi_bleu.sh tokenization (Wang et al.'s eval)", bleu=True, tokenized=True, compound_split="wang", needs_ref_tok="detokenizes the tokenized reference (dlcl's T lines)", paired=f"{_P}:paired_tokenized_bleu"))  # fmt: skip
register(MetricSpec("ter", "TER↓", f"{_M}:score_ter", "TER", higher_is_better=False, paired=f"{_P}:paired_ter", column=2))  # fmt: skip
register(MetricSpec("chrf", "chrF2↑", f"{_M}:score_chrf2", "chrF2", paired=f"{_P}:paired_chrf", column=4))  # fmt: skip
register(MetricSpec("meteor", "METEOR↑", "pipeline_lib.evaluate.meteor:score_meteor", needs_lang="the target language picks its stemmer", column=3))  # fmt: skip
