"""``binarize``: build the joint vocabulary and memory-mapped token ids.

Usage::

    python -m pipeline_lib binarize --in-dir work/demo/bpe --out-dir work/demo/bin \\
        --src en --tgt fr [--threshold 0] [--nwords -1] [--vocab other/vocab.txt]

    # monolingual target text for back-translation, with the parallel data's vocabulary:
    python -m pipeline_lib binarize --in-dir work/demo/bpe --out-dir work/demo/bin-mono \\
        --src fr --splits mono --vocab work/demo/bin/vocab.txt

The flags are ``BinarizeSettings``' fields; the vocabulary and the output directory:
``pipeline_lib/data/binarize.py``.
"""

from __future__ import annotations

import argparse
import logging

from pipeline_lib.data.binarize import BinarizeSettings, binarize
from pipeline_lib.dataclass_cli import add_dataclass_arguments, dataclass_from_args


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, BinarizeSettings)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    binarize(dataclass_from_args(BinarizeSettings, args))
    return 0
