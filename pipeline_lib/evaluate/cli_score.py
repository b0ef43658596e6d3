"""`python -m pipeline_lib score`: every Table-1 metric for one system, with signatures, as JSON."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pipeline_lib.atomic import write_json
from pipeline_lib.data.moses import tokenize_like_test_set, tokenize_lines
from pipeline_lib.dataclass_cli import add_dataclass_arguments
from pipeline_lib.divergence.placeholders import add_skip_argument, skip_diverged
from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.fairseq_bleu import read_generate
from pipeline_lib.evaluate.metric_registry import (
    METRICS,
    ScoreInputs,
    compound_split_metrics,
    metric_names,
    metric_spec,
)
from pipeline_lib.evaluate.reference_scheme import hypothesis_scheme
from pipeline_lib.evaluate.score_settings import ScoreSettings
from pipeline_lib.evaluate.segments import check_same_length, read_segments

log = logging.getLogger(__name__)

SCHEMA = "deepnmt-score/1"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, ScoreSettings)
    add_skip_argument(p)


def _tokenized_inputs(
    args: argparse.Namespace, hyps: list[str], refs: list[str]
) -> tuple[list[str], list[str], dict[str, str]] | None:
    if not (args.hyp_tok or args.ref_tok or args.moses_lang):
        return None
    sources: dict[str, str] = {}
    if args.hyp_tok:
        hyp_tok = read_segments(args.hyp_tok)
        check_same_length(args.hyp_tok, hyp_tok, args.hyp, hyps)
        sources["hypothesis_tok"] = str(args.hyp_tok)
    elif args.moses_lang:
        scheme = hypothesis_scheme(args.ref_tok, args.ref_tok_meta)
        hyp_tok = tokenize_lines(hyps, args.moses_lang, scheme)
        how = (
            f"the reference's tokenization ({args.ref_tok_meta})"
            if args.ref_tok
            else "fairseq test tokenization"
        )
        sources["hypothesis_tok"] = f"{how} ({args.moses_lang}) of {args.hyp}"
    else:
        raise ConfigError("--ref-tok given without --hyp-tok: give --hyp-tok or --moses-lang")
    if args.ref_tok:
        ref_tok = read_segments(args.ref_tok, allow_empty=False)
        check_same_length(args.ref_tok, ref_tok, args.ref, refs)
        sources["reference_tok"] = str(args.ref_tok)
    elif args.moses_lang:
        ref_tok = tokenize_like_test_set(refs, args.moses_lang)
        sources["reference_tok"] = f"fairseq test tokenization ({args.moses_lang}) of {args.ref}"
    else:
        raise ConfigError("--hyp-tok given without --ref-tok: give --ref-tok or --moses-lang")
    return hyp_tok, ref_tok, sources


def _lang_from_suffix(path: str) -> str | None:
    """The language of a ``{name}.{xx}`` file (the corpus naming convention), else None."""
    suffix = Path(path).suffix.lstrip(".")
    return suffix if len(suffix) == 2 and suffix.isalpha() and suffix.islower() else None


def _wanted(args: argparse.Namespace) -> list[str]:
    """The metrics to compute, in the registry's order: --metrics, else every metric but the
    compound-split ones (tokenized BLEU only with tokenized inputs), plus --compound-split's."""
    can_tokenize = bool(args.hyp_tok or args.ref_tok or args.moses_lang)
    plain = [
        n
        for n, m in METRICS.items()
        if not m.compound_split and (not m.pair or can_tokenize) and (not m.generate or args.generate)
    ]
    wanted = set(args.metrics) if args.metrics else set(plain)
    schemes = {scheme: name for name, scheme in compound_split_metrics().items()}
    wanted |= {schemes[s] for s in args.compound_split}
    return [n for n in METRICS if n in wanted]


def _check_inputs(args: argparse.Namespace, wanted: list[str], lang: str | None) -> None:
    """What each wanted metric reads is there, before anything is read or computed."""
    for name in args.metrics or metric_names():
        spec = metric_spec(name)
        if spec.needs_lang and not lang:
            raise ConfigError(
                f"{spec.label} needs --lang ({spec.needs_lang}; {args.ref} has no .xx language "
                f"suffix to take it from); or leave {name} out of --metrics"
            )
    specs = [metric_spec(n) for n in wanted]
    if any(s.compound_split for s in specs) and not args.moses_lang:
        raise ConfigError("the compound-split metrics need --moses-lang (the target language)")
    for spec in specs:
        if spec.generate and not args.generate:
            raise ConfigError(f"--metrics {spec.name} needs --generate (translate's --output-generate file)")
        if spec.needs_ref_tok and not args.ref_tok:
            raise ConfigError(f"{spec.name} {spec.needs_ref_tok}: give --ref-tok")


def score_system(args: argparse.Namespace) -> dict[str, Any]:
    lang = args.lang or _lang_from_suffix(args.ref)
    wanted = _wanted(args)
    _check_inputs(args, wanted, lang)
    # Read and validate everything before computing anything: bad input fails early.
    refs = read_segments(args.ref, allow_empty=False)
    hyps = read_segments(args.hyp)
    check_same_length(args.hyp, hyps, args.ref, refs)
    pair = [n for n in wanted if metric_spec(n).pair]
    tokenized = _tokenized_inputs(args, hyps, refs) if pair else None
    if pair and tokenized is None:
        raise ConfigError(f"--metrics {pair[0]} needs --hyp-tok/--ref-tok or --moses-lang")
    generate = None
    if any(metric_spec(n).generate for n in wanted):
        generate = read_generate(args.generate, args.subword)
        check_same_length(args.generate, generate.hyps, args.hyp, hyps)
    inputs = ScoreInputs(
        hyps=hyps,
        refs=refs,
        lang=lang,
        moses_lang=args.moses_lang,
        ref_tok=read_segments(args.ref_tok, allow_empty=False) if args.ref_tok else None,
        tokenized=tokenized,
        use_wordnet=not args.no_wordnet,
        generate=generate,
    )
    scores: dict[str, Any] = {name: metric_spec(name).score(inputs) for name in wanted}
    for name, value in scores.items():
        log.info(
            "%s %s = %.2f (%s)", args.system or Path(args.hyp).stem, name, value["score"], value["signature"]
        )
    return {
        "schema": SCHEMA,
        "system": args.system or Path(args.hyp).stem,
        "hypothesis": str(args.hyp),
        "reference": str(args.ref),
        "n_segments": len(hyps),
        "n_empty_hypotheses": sum(1 for h in hyps if not h),
        "scores": scores,
    }


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.skip_if_diverged and skip_diverged(args.skip_if_diverged, score=args.output, system=args.system):
        return 0
    result = score_system(args)
    write_json(args.output, result)
    line = " ".join(f"{k}={v['score']:.2f}" for k, v in result["scores"].items())
    print(f"{result['system']}: {line} ({result['n_segments']} segments) -> {args.output}")
    return 0
