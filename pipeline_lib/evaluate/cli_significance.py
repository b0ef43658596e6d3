"""`python -m pipeline_lib significance`: paired bootstrap vs a baseline and the Table-3 matrix."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from pipeline_lib.atomic import write_json, write_text
from pipeline_lib.data.moses import tokenize_like_test_set, tokenize_lines
from pipeline_lib.dataclass_cli import add_dataclass_arguments
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.evaluate import compound_split as CS
from pipeline_lib.evaluate import significance as S
from pipeline_lib.evaluate.fairseq_bleu import paired_view, read_generate
from pipeline_lib.evaluate.metric_registry import metric_spec
from pipeline_lib.evaluate.reference_scheme import hypothesis_scheme
from pipeline_lib.evaluate.segments import (
    check_same_length,
    read_segments,
)
from pipeline_lib.evaluate.significance_settings import SignificanceSettings

log = logging.getLogger(__name__)

SCHEMA = "deepnmt-significance/1"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, SignificanceSettings)


def _vs_baseline(out: dict[str, Any], metric: str, alpha: float) -> dict[str, Any]:
    base, *systems = out["results"]
    rows = []
    for res in systems:
        significant = res["p_value"] < alpha
        better = (
            res["score"] > base["score"]
            if metric_spec(metric).higher_is_better
            else res["score"] < base["score"]
        )
        rows.append({**res, "significant": significant, "better": better})
    return {"signature": out["signature"], "baseline": base, "systems": rows}


def _tokenized_view(
    args: argparse.Namespace, named: list[tuple[str, list[str]]], refs: list[str]
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The systems and reference as tokenized BLEU sees them."""
    if not args.moses_lang:
        raise ConfigError("--metrics tok_bleu needs --moses-lang (the hypotheses are tokenized with it)")
    if args.ref_tok:
        ref_tok = read_segments(args.ref_tok, allow_empty=False)
        check_same_length(args.ref_tok, ref_tok, args.ref, refs)
    else:
        ref_tok = tokenize_like_test_set(refs, args.moses_lang)
    scheme = hypothesis_scheme(args.ref_tok, args.ref_tok_meta)
    named_tok = [(name, tokenize_lines(hyps, args.moses_lang, scheme)) for name, hyps in named]
    return named_tok, ref_tok


def _generate_view(
    args: argparse.Namespace, metric: str, names: list[str]
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The systems and reference as fairseq-generate's BLEU4 compares them (fairseq_bleu.paired_view);
    every system must have been decoded against the same binarized reference."""
    files = dict(args.generate)
    missing = [n for n in names if n not in files]
    if missing:
        raise ConfigError(f"--metrics {metric} needs --generate NAME=FILE for {missing}")
    # a diverged run's placeholder (divergence/placeholders.py) holds one empty line per sentence and no
    # H/T lines: it competes with empty hypotheses, as its text file does in the other views
    decoded = {n: read_generate(files[n], args.subword) for n in names if not _is_placeholder(files[n])}
    if not decoded:
        raise InputError(f"--generate: every file is a diverged run's placeholder: {sorted(files.values())}")
    gens = list(decoded.values())
    for gen in gens[1:]:
        if gen.refs != gens[0].refs:
            # another vocabulary (a back-translation mix's, say) marks other reference words <unk>:
            # the pairs are compared on the first system's binarized reference, and the log says so
            log.warning(
                "%s: its T lines differ from %s's (another vocabulary's <unk>); %s is compared on the latter",
                gen.path, gens[0].path, metric,
            )  # fmt: skip
    refs = gens[0].refs
    views = [paired_view(decoded[n].hyps if n in decoded else [""] * len(refs), refs) for n in names]
    return [(n, hyps) for n, (hyps, _) in zip(names, views, strict=True)], views[0][1]


def _is_placeholder(path: str) -> bool:
    with open(path, encoding="utf-8") as handle:
        return not handle.read().strip()


def _compound_split_view(
    args: argparse.Namespace, metric: str, named: list[tuple[str, list[str]]], refs: list[str]
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The systems and reference as an En-De eval script's multi-bleu.perl reads them (both sides
    from detokenized text: evaluate.compound_split)."""
    if not args.moses_lang:
        raise ConfigError(f"--metrics {metric} needs --moses-lang (the target language)")
    ref_tok = read_segments(args.ref_tok, allow_empty=False) if args.ref_tok else None
    if ref_tok is not None:
        check_same_length(args.ref_tok, ref_tok, args.ref, refs)
    scheme = metric_spec(metric).compound_split
    ref_view = CS.reference_view(scheme, refs, ref_tok, args.moses_lang)
    return [(name, CS.hypothesis_view(scheme, hyps, args.moses_lang)) for name, hyps in named], ref_view


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not 0.0 < args.alpha < 1.0:
        raise ConfigError(f"--alpha: must be in (0, 1), got {args.alpha}")
    S.validate(args.n_samples, args.seed)
    if args.markdown and args.no_matrix:
        raise ConfigError("--markdown renders the pairwise matrix: drop --no-matrix")
    specs = [args.baseline, *args.systems]
    names = [name for name, _ in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"--systems: duplicate system name(s) {duplicates}; use NAME=FILE to disambiguate")

    refs = read_segments(args.ref, allow_empty=False)
    named = []
    for name, path in specs:
        hyps = read_segments(path)
        check_same_length(path, hyps, args.ref, refs)
        named.append((name, hyps))

    result: dict[str, Any] = {
        "schema": SCHEMA,
        "reference": str(args.ref),
        "n_segments": len(refs),
        "n_samples": args.n_samples,
        "seed": args.seed,
        "alpha": args.alpha,
        "systems": [{"name": name, "file": str(path)} for name, path in specs],
        "vs_baseline": {},
        "pairwise": {},
    }
    views = {}
    for metric in args.metrics:  # the text each metric reads: detokenized, tokenized or compound-split
        spec = metric_spec(metric)
        if spec.compound_split:
            views[metric] = _compound_split_view(args, metric, named, refs)
        elif spec.generate:
            views[metric] = _generate_view(args, metric, names)
        elif spec.tokenized:
            views[metric] = _tokenized_view(args, named, refs)
        else:
            views[metric] = (named, refs)
    for metric in args.metrics:
        named, refs = views[metric]
        log.info("%s: paired bootstrap of %d systems vs %s", metric, len(args.systems), names[0])
        out = S.paired_bootstrap(named, refs, metric, n_samples=args.n_samples, seed=args.seed)
        result["vs_baseline"][metric] = _vs_baseline(out, metric, args.alpha)
        if not args.no_matrix:

            def progress(done: int, total: int, metric: str = metric) -> None:
                log.info("%s matrix: baseline row %d/%d done", metric, done, total)

            result["pairwise"][metric] = S.pairwise_matrix(
                named,
                refs,
                metric,
                n_samples=args.n_samples,
                seed=args.seed,
                alpha=args.alpha,
                progress=progress,
                first_row=out,
            )

    write_json(args.output, result)
    if args.markdown:
        text = "\n".join(S.render_matrix_markdown(m) for m in result["pairwise"].values())
        write_text(args.markdown, text)
    for metric, block in result["vs_baseline"].items():
        for row in [block["baseline"], *block["systems"]]:
            p = "baseline" if row["p_value"] is None else f"p={row['p_value']:.4f}"
            star = "*" if row.get("significant") else ""
            print(
                f"{metric} {row['name']}: {row['score']:.2f} ({row['mean']:.2f} +- {row['ci']:.2f}) {p}{star}"
            )
    return 0
