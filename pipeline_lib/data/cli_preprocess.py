"""``preprocess``: Moses normalize/tokenize and clean a raw ``{split}.{lang}`` directory.

Usage::

    python -m pipeline_lib preprocess --in-dir work/demo/raw --out-dir work/demo/tok \\
        --src en --tgt fr [--ratio 1.5 --min-len 1 --max-len 250] [--clean-splits train valid] \\
        [--clean-after tokenize|bpe] [--dedup] [--workers N]

The flags are ``PreprocessSettings``' fields; what each split gets, and the outputs:
``pipeline_lib/data/preprocess.py``.
"""

from __future__ import annotations

import argparse
import logging

from pipeline_lib.data.preprocess import PreprocessSettings, preprocess
from pipeline_lib.dataclass_cli import add_dataclass_arguments, dataclass_from_args


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, PreprocessSettings)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    preprocess(dataclass_from_args(PreprocessSettings, args))
    return 0
