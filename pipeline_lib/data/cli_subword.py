"""``learn-bpe`` / ``apply-bpe``: joint subword segmentation (subword-nmt BPE or SentencePiece).

Learn (on the train split of both languages, jointly)::

    python -m pipeline_lib learn-bpe --in-dir work/demo/tok --src en --tgt fr \\
        --model-dir work/demo/subword --merges 10000            # subword-nmt joint BPE
    python -m pipeline_lib learn-bpe ... --kind spm --spm-type unigram --vocab-size 8000

Apply (every ``{split}.{lang}`` and ``mono.{lang}`` file of ``--in-dir``, chunk-parallel)::

    python -m pipeline_lib apply-bpe --in-dir work/demo/tok --model-dir work/demo/subword \\
        --out-dir work/demo/bpe --src en --tgt fr [--vocab-threshold 50] [--workers N] \\
        [--clean-splits train valid --ratio 1.5 --min-len 1 --max-len 250]

The flags are ``LearnSettings``' and ``ApplySettings``' fields; what each does:
``pipeline_lib/data/learn_subword.py`` and ``pipeline_lib/data/apply_subword.py``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from pipeline_lib.data.apply_subword import ApplySettings, apply_subword
from pipeline_lib.data.learn_subword import LearnSettings, learn_subword
from pipeline_lib.dataclass_cli import add_dataclass_arguments, dataclass_from_args


def add_learn_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, LearnSettings)


def run_learn(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    learn_subword(dataclass_from_args(LearnSettings, args))
    return 0


def add_apply_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, ApplySettings)


def run_apply(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    apply_subword(dataclass_from_args(ApplySettings, args))
    return 0


def commands() -> dict[str, tuple[Callable, Callable]]:
    return {
        "learn-bpe": (add_learn_arguments, run_learn),
        "apply-bpe": (add_apply_arguments, run_apply),
    }
