"""`python -m pipeline_lib analyze`: Figure 3 (word accuracy by training frequency, BLEU by length)
for N systems side by side: JSON + TSV data and PNG plots."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pipeline_lib.atomic import write_json, write_text
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.evaluate import analysis as A
from pipeline_lib.evaluate.segments import (
    check_same_length,
    iter_segments,
    read_segments,
)
from pipeline_lib.evaluate.significance_settings import named_path

log = logging.getLogger(__name__)

SCHEMA = "deepnmt-analyze/1"


def _cutoffs(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",")]
        A.make_buckets(values)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected increasing positive integers like 10,20,30: {exc}"
        ) from exc
    return values


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ref", required=True, help="reference, one segment per line (UTF-8)")
    p.add_argument("--systems", nargs="+", required=True, type=named_path, help="[NAME=]FILE per system")
    p.add_argument("--src", help="source file; needed for --length-of source")
    freq = p.add_mutually_exclusive_group(required=True)
    freq.add_argument("--train-target", help="training target corpus to count word frequencies from")
    freq.add_argument("--freq-counts", help="precomputed counts, one 'word<TAB>count' per line")
    p.add_argument("--output-dir", "-o", required=True, help="folder for analysis.json, *.tsv and *.png")
    p.add_argument(
        "--tokenize",
        choices=["13a", "none"],
        default="13a",
        help="how every input (also the training corpus) is split into words: sacrebleu 13a (default, for "
        "detokenized text) or 'none' (already tokenized, e.g. Moses; BLEU then on whitespace tokens)",
    )
    p.add_argument("--lowercase", action="store_true", help="case-insensitive words and BLEU")
    p.add_argument(
        "--length-of",
        choices=["source", "reference"],
        help="bucket sentences by source or reference length (default: source if --src is given)",
    )
    p.add_argument(
        "--freq-cutoffs", type=_cutoffs, default=list(A.FREQ_CUTOFFS), help="default 1,2,3,4,5,10,100,1000"
    )
    p.add_argument(
        "--length-cutoffs", type=_cutoffs, default=list(A.LENGTH_CUTOFFS), help="default 10,20,...,60"
    )
    p.add_argument("--no-plots", action="store_true", help="write the data only")


def _read_freq_counts(path: str, lowercase: bool) -> dict[str, int]:
    counts: dict[str, int] = {}
    for lineno, line in iter_segments(path):
        if not line:
            continue
        cols = line.split("\t")
        if len(cols) != 2 or not cols[1].strip().isdigit():
            raise InputError(f"{path}:{lineno}: expected 'word<TAB>count', got {line[:60]!r}")
        word = cols[0].lower() if lowercase else cols[0]
        counts[word] = counts.get(word, 0) + int(cols[1])
    return counts


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    length_of = args.length_of or ("source" if args.src else "reference")
    if length_of == "source" and not args.src:
        raise ConfigError("--length-of source needs --src")
    names = [name for name, _ in args.systems]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"--systems: duplicate system name(s) {duplicates}; use NAME=FILE to disambiguate")

    # Validate all evaluation inputs before the (possibly long) frequency count.
    refs = read_segments(args.ref, allow_empty=False)
    systems = []
    for name, path in args.systems:
        hyps = read_segments(path)
        check_same_length(path, hyps, args.ref, refs)
        systems.append((name, path, hyps))
    srcs = None
    if args.src:
        srcs = read_segments(args.src, allow_empty=False)
        check_same_length(args.src, srcs, args.ref, refs)

    tok = A.get_tokenizer(args.tokenize, args.lowercase)
    if args.train_target:
        lines = tqdm(
            iter_segments(args.train_target), desc="counting training words", unit=" lines", mininterval=5
        )
        freqs = A.count_frequencies(tok(text) for _, text in lines)
        freq_source = str(args.train_target)
    else:
        freqs = _read_freq_counts(args.freq_counts, args.lowercase)
        freq_source = str(args.freq_counts)

    ref_tokens = [tok(r) for r in refs]
    length_basis = [tok(s) for s in srcs] if length_of == "source" else ref_tokens
    lengths = [len(t) for t in length_basis]

    word_acc: dict[str, list[dict[str, Any]]] = {}
    length_bleu: dict[str, list[dict[str, Any]]] = {}
    signature = ""
    for name, _, hyps in systems:
        word_acc[name] = A.word_accuracy_by_frequency(
            [tok(h) for h in hyps], ref_tokens, freqs, args.freq_cutoffs
        )
        length_bleu[name], signature = A.bleu_by_length(
            hyps, refs, lengths, args.length_cutoffs, tokenize=args.tokenize, lowercase=args.lowercase
        )

    freq_buckets = A.make_buckets(args.freq_cutoffs)
    len_buckets = A.make_buckets(args.length_cutoffs)
    result = {
        "schema": SCHEMA,
        "reference": str(args.ref),
        "source": str(args.src) if args.src else None,
        "n_segments": len(refs),
        "tokenize": args.tokenize,
        "lowercase": args.lowercase,
        "systems": [{"name": name, "file": str(path)} for name, path, _ in systems],
        "word_accuracy": {
            "frequency_source": freq_source,
            "n_train_types": len(freqs),
            "buckets": [b.as_dict() for b in freq_buckets],
            "systems": word_acc,
        },
        "length_bleu": {
            "length_of": length_of,
            "signature": signature,
            "buckets": [b.as_dict() for b in len_buckets],
            "systems": length_bleu,
        },
    }
    out = Path(args.output_dir)
    write_json(out / "analysis.json", result)
    wa_cols = ["matched", "ref_count", "out_count", "recall", "precision", "f_measure"]
    write_text(out / "word_accuracy.tsv", _tsv(word_acc, wa_cols))
    write_text(out / "length_bleu.tsv", _tsv(length_bleu, ["n_segments", "bleu", "sys_len", "ref_len"]))
    if not args.no_plots:
        from pipeline_lib.evaluate.analysis_plots import grouped_bars

        grouped_bars(
            str(out / "word_accuracy.png"),
            [b.label for b in freq_buckets],
            {n: [r["f_measure"] for r in rows] for n, rows in word_acc.items()},
            xlabel="frequency in training data",
            ylabel="word F-measure",
            title="Word accuracy by training frequency",
        )
        grouped_bars(
            str(out / "length_bleu.png"),
            [b.label for b in len_buckets],
            {n: [r["bleu"] for r in rows] for n, rows in length_bleu.items()},
            xlabel=f"{length_of} length (tokens)",
            ylabel="BLEU",
            title=f"BLEU by {length_of} length",
        )
    print(f"analyze: {len(systems)} systems, {len(refs)} segments -> {out}")
    return 0


def _tsv(per_system: dict[str, list[dict[str, Any]]], columns: list[str]) -> str:
    lines = ["\t".join(["system", "bucket", *columns])]
    for name, rows in per_system.items():
        for row in rows:
            cells = [name, row["bucket"]] + ["" if row[c] is None else _fmt(row[c]) for c in columns]
            lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
