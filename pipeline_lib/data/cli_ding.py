"""``prepare-ding``: German-English example sentences from Debian's ``trans-de-en`` (Ding).

Usage::

    python -m pipeline_lib prepare-ding --out-dir work/ding/raw [--resources resources/] \\
        [--src de --tgt en] [--valid-size 500 --test-size 1000] [--seed 1]

What is kept and how it is split: ``pipeline_lib/data/ding_corpus.py``.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline_lib.data.ding_corpus import build_ding_corpus
from pipeline_lib.data.resources import resources_dir
from pipeline_lib.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "German-English example sentences (~18.7k pairs) from Debian's trans-de-en (Ding), fetched with "
        "'apt-get download' (no root) and split at random into train/valid/test."
    )
    p.add_argument(
        "--out-dir", required=True, type=Path, help="writes {train,valid,test}.{src,tgt} + splits.json"
    )
    p.add_argument(
        "--resources",
        type=Path,
        default=None,
        help="where the .deb is downloaded and kept (default: $DEEPNMT_RESOURCES or resources/)",
    )
    p.add_argument("--src", default="de", choices=["de", "en"], help="source language (default de)")
    p.add_argument("--tgt", default="en", choices=["de", "en"], help="target language (default en)")
    p.add_argument("--valid-size", type=int, default=500, help="pairs drawn for valid (default 500)")
    p.add_argument("--test-size", type=int, default=1000, help="pairs drawn for test (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the valid/test draw (default 1)")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.src == args.tgt:
        raise ConfigError("--src and --tgt must differ")
    build_ding_corpus(
        args.out_dir,
        args.resources or resources_dir(),
        src=args.src,
        tgt=args.tgt,
        valid_size=args.valid_size,
        test_size=args.test_size,
        seed=args.seed,
    )
    return 0
