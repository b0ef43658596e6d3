"""``binarize``: build the joint vocabulary and memory-mapped token ids.

Usage::

    python -m pipeline_lib binarize --in-dir work/demo/bpe --out-dir work/demo/bin \\
        --src en --tgt fr [--threshold 0] [--nwords -1] [--vocab other/vocab.txt]

    # monolingual target text for back-translation, with the parallel data's vocabulary:
    python -m pipeline_lib binarize --in-dir work/demo/bpe --out-dir work/demo/bin-mono \\
        --src fr --splits mono --vocab work/demo/bin/vocab.txt

The vocabulary and the output directory: ``pipeline_lib/data/binarize.py``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline_lib.data.binarize import BinarizeSettings, binarize
from pipeline_lib.data.chunk_map import default_workers
from pipeline_lib.errors import ConfigError
from pipeline_lib.lang_code import lang_code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="subword-segmented {split}.{lang} files")
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument(
        "--src", required=True, type=lang_code, help="source language (the only one for monolingual data)"
    )
    p.add_argument(
        "--tgt", default=None, type=lang_code, help="target language (omit to binarize one language)"
    )
    p.add_argument("--splits", nargs="+", default=["train", "valid", "test"])
    p.add_argument("--threshold", type=int, default=0, help="drop tokens seen fewer times (0: keep all)")
    p.add_argument("--nwords", type=int, default=-1, help="max vocabulary size without specials (-1: all)")
    p.add_argument("--vocab", type=Path, default=None, help="reuse this vocab.txt instead of building one")
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--chunk-size", type=int, default=5000, help="lines per parallel work unit")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    langs = [args.src] if args.tgt is None else [args.src, args.tgt]
    if len(set(langs)) != len(langs):
        raise ConfigError("--src and --tgt must differ")
    if args.threshold < 0:
        raise ConfigError(f"--threshold must be >= 0, got {args.threshold}")
    if args.workers < 1 or args.chunk_size < 1:
        raise ConfigError(
            f"--workers and --chunk-size must be >= 1, got {args.workers} and {args.chunk_size}"
        )
    settings = BinarizeSettings(
        in_dir=args.in_dir,
        out_dir=args.out_dir,
        src=args.src,
        tgt=args.tgt,
        splits=args.splits,
        threshold=args.threshold,
        nwords=args.nwords,
        vocab=args.vocab,
        workers=args.workers,
        chunk_size=args.chunk_size,
    )
    binarize(settings)
    return 0
