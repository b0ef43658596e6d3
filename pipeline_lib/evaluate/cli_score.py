"""`python -m pipeline_lib score`: every Table-1 metric for one system, with signatures, as JSON."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pipeline_lib.atomic import write_json
from pipeline_lib.data.moses import tokenize_like_test_set, tokenize_lines
from pipeline_lib.divergence.placeholders import add_skip_argument, skip_diverged
from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate import compound_split as CS
from pipeline_lib.evaluate import metrics as M
from pipeline_lib.evaluate.reference_scheme import hypothesis_scheme
from pipeline_lib.evaluate.segments import check_same_length, read_segments

log = logging.getLogger(__name__)

SCHEMA = "deepnmt-score/1"
ALL_METRICS = ("bleu", "tok_bleu", "ter", "chrf", "meteor", *CS.METRICS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hyp", required=True, help="detokenized hypothesis, one segment per line (UTF-8)")
    p.add_argument("--ref", required=True, help="detokenized reference, same number of lines")
    p.add_argument("--output", "-o", required=True, help="JSON file to write (atomically)")
    p.add_argument("--system", help="system name stored in the JSON (default: hypothesis file stem)")
    p.add_argument(
        "--metrics",
        nargs="+",
        choices=ALL_METRICS,
        help="metrics to compute (default: all but the compound-split ones; tok_bleu only when tokenized "
        "inputs are available)",
    )
    tok = p.add_argument_group("tokenized BLEU (multi-bleu.perl convention)")
    tok.add_argument("--hyp-tok", help="Moses-tokenized hypothesis (BPE removed)")
    tok.add_argument("--ref-tok", help="Moses-tokenized reference")
    tok.add_argument(
        "--ref-tok-meta",
        help="preprocess's meta.json beside --ref-tok: the hypothesis is tokenized as it records the "
        "reference's split was (needed with --ref-tok and --moses-lang)",
    )
    tok.add_argument(
        "--moses-lang",
        help="tokenize whichever of --hyp-tok/--ref-tok is missing from the detokenized file as fairseq's "
        "prepare-wmt14 scripts tokenize test (sed s/’/'/g, tokenizer.perl -a; no normalization)",
    )
    tok.add_argument(
        "--compound-split",
        nargs="+",
        choices=sorted(CS.SCHEMES),
        default=[],
        help="also score tok_bleu_<scheme>: an En-De eval script's own tokenization of both detokenized "
        "sides, then s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g (t2t: get_ende_bleu.sh; wang: dlcl's "
        "wmt_en2de_google_multi_bleu.sh, from --ref-tok). tok_bleu itself is never split",
    )
    add_skip_argument(p)
    p.add_argument(
        "--lang",
        help="language of hypothesis and reference (ISO 639-1, e.g. fr; default: the reference file's "
        "suffix, as in test.fr); METEOR's Snowball stemmer is that language's, and its WordNet synonym "
        "module runs only for en",
    )
    p.add_argument(
        "--no-wordnet",
        action="store_true",
        help="METEOR without the WordNet synonym module even if WordNet data is installed",
    )


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


def score_system(args: argparse.Namespace) -> dict[str, Any]:
    lang = args.lang or _lang_from_suffix(args.ref)
    if "meteor" in (args.metrics or ALL_METRICS) and not lang:
        raise ConfigError(
            f"METEOR needs --lang (the target language picks its stemmer; {args.ref} has no .xx language "
            "suffix to take it from); or leave meteor out of --metrics"
        )
    # Read and validate everything before computing anything: bad input fails early.
    refs = read_segments(args.ref, allow_empty=False)
    hyps = read_segments(args.hyp)
    check_same_length(args.hyp, hyps, args.ref, refs)
    can_tokenize = bool(args.hyp_tok or args.ref_tok or args.moses_lang)
    plain = [m for m in ALL_METRICS if m not in CS.METRICS and (m != "tok_bleu" or can_tokenize)]
    wanted = list(args.metrics) if args.metrics else plain
    wanted += [CS.SCHEMES[s] for s in args.compound_split if CS.SCHEMES[s] not in wanted]
    tokenized = _tokenized_inputs(args, hyps, refs) if "tok_bleu" in wanted else None
    if "tok_bleu" in wanted and tokenized is None:
        raise ConfigError("--metrics tok_bleu needs --hyp-tok/--ref-tok or --moses-lang")
    if any(m in CS.METRICS for m in wanted) and not args.moses_lang:
        raise ConfigError("the compound-split metrics need --moses-lang (the target language)")
    if "tok_bleu_wang" in wanted and not args.ref_tok:
        raise ConfigError(
            "tok_bleu_wang detokenizes the tokenized reference (dlcl's T lines): give --ref-tok"
        )

    scores: dict[str, Any] = {}
    if "bleu" in wanted:
        scores["bleu"] = M.sacre_bleu(hyps, refs)
    if "tok_bleu" in wanted:
        hyp_tok, ref_tok, sources = tokenized
        scores["tok_bleu"] = {
            **M.tokenized_bleu(hyp_tok, ref_tok),
            **sources,
        }
    ref_tok_lines = read_segments(args.ref_tok, allow_empty=False) if args.ref_tok else None
    for metric in (m for m in wanted if m in CS.METRICS):
        scores[metric] = CS.score(CS.METRICS[metric], hyps, refs, ref_tok_lines, args.moses_lang)
    if "ter" in wanted:
        scores["ter"] = M.ter(hyps, refs)
    if "chrf" in wanted:
        scores["chrf"] = M.chrf2(hyps, refs)
    if "meteor" in wanted:
        from pipeline_lib.evaluate.meteor import meteor

        scores["meteor"] = meteor(hyps, refs, lang=lang, use_wordnet=not args.no_wordnet)
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
