"""``preprocess``: Moses normalize/tokenize and clean a raw ``{split}.{lang}`` directory.

Usage::

    python -m pipeline_lib preprocess --in-dir work/demo/raw --out-dir work/demo/tok \\
        --src en --tgt fr [--ratio 1.5 --min-len 1 --max-len 250] [--clean-splits train valid] \\
        [--clean-after tokenize|bpe] [--dedup] [--workers N]

What each split gets, and the outputs: ``pipeline_lib/data/preprocess.py``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline_lib.data import moses
from pipeline_lib.data.chunk_map import default_workers
from pipeline_lib.data.preprocess import CLEAN_AFTER, PreprocessSettings, preprocess
from pipeline_lib.errors import ConfigError
from pipeline_lib.lang_code import lang_code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="directory with raw {split}.{lang} files")
    p.add_argument("--out-dir", required=True, type=Path, help="output directory (tokenized text)")
    p.add_argument("--src", required=True, type=lang_code, help="source language code (en)")
    p.add_argument("--tgt", required=True, type=lang_code, help="target language code (fr)")
    p.add_argument(
        "--splits",
        nargs="+",
        default=["train", "valid", "test", "mono"],
        help="splits to process (mono: mono.{lang} files, where present)",
    )
    p.add_argument(
        "--clean-splits", nargs="*", default=["train", "valid"], help="splits filtered by clean-corpus-n"
    )
    p.add_argument(
        "--clean-after",
        choices=CLEAN_AFTER,
        default="tokenize",
        help="tokenize: clean the --clean-splits here, on Moses tokens; bpe: apply-bpe cleans them on "
        "subwords (fairseq's WMT'14 En-Fr), so here they only lose empty and --hard-limit lines",
    )
    p.add_argument("--ratio", type=float, default=1.5, help="max length ratio (clean-corpus-n -ratio)")
    p.add_argument("--min-len", type=int, default=1, help="min tokens per side")
    p.add_argument("--max-len", type=int, default=250, help="max tokens per side")
    p.add_argument("--hard-limit", type=int, default=10_000, help="drop lines over this many raw tokens")
    p.add_argument(
        "--dedup", action="store_true", help="drop repeated (source, target) pairs in cleaned splits"
    )
    p.add_argument("--valid-every", type=int, default=0, help="carve valid from every N-th train line")
    p.add_argument("--max-train-lines", type=int, default=None, help="keep only the first N training pairs")
    p.add_argument(
        "--no-tokenize", action="store_true", help="normalize only (for SentencePiece on raw text)"
    )
    p.add_argument("--no-normalize", action="store_true", help="skip normalize-punctuation")
    p.add_argument(
        "--normalize-test",
        action="store_true",
        help="normalize test like train (default: fairseq's test branch, sed s/’/'/g + tokenizer -a only)",
    )
    p.add_argument("--no-aggressive", action="store_true", help="tokenize without -a")
    p.add_argument("--lowercase", action="store_true", help="lowercase every split after tokenizing")
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--chunk-size", type=int, default=2000, help="lines per parallel work unit")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    clean_cfg = moses.CleanConfig(args.ratio, args.min_len, args.max_len, args.hard_limit)
    tok_cfg = moses.TokConfig(
        normalize=not args.no_normalize,
        tokenize=not args.no_tokenize,
        aggressive_dash_splits=not args.no_aggressive,
        lowercase=args.lowercase,
    )
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    if args.max_train_lines is not None and args.max_train_lines < 1:
        raise ConfigError(f"--max-train-lines must be >= 1, got {args.max_train_lines}")
    if args.chunk_size < 1:
        raise ConfigError(f"--chunk-size must be >= 1, got {args.chunk_size}")
    if args.src == args.tgt:
        raise ConfigError("--src and --tgt must differ")
    settings = PreprocessSettings(
        in_dir=args.in_dir,
        out_dir=args.out_dir,
        src=args.src,
        tgt=args.tgt,
        tok=tok_cfg,
        clean=clean_cfg,
        splits=args.splits,
        clean_splits=args.clean_splits,
        clean_after=args.clean_after,
        dedup=args.dedup,
        valid_every=args.valid_every,
        max_train_lines=args.max_train_lines,
        normalize_test=args.normalize_test,
        workers=args.workers,
        chunk_size=args.chunk_size,
    )
    preprocess(settings)
    return 0
