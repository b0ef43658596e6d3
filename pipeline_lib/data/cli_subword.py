"""``learn-bpe`` / ``apply-bpe``: joint subword segmentation (subword-nmt BPE or SentencePiece).

Learn (on the train split of both languages, jointly)::

    python -m pipeline_lib learn-bpe --in-dir work/demo/tok --src en --tgt fr \\
        --model-dir work/demo/subword --merges 10000            # subword-nmt joint BPE
    python -m pipeline_lib learn-bpe ... --kind spm --spm-type unigram --vocab-size 8000

Apply (every ``{split}.{lang}`` and ``mono.{lang}`` file of ``--in-dir``, chunk-parallel)::

    python -m pipeline_lib apply-bpe --in-dir work/demo/tok --model-dir work/demo/subword \\
        --out-dir work/demo/bpe --src en --tgt fr [--vocab-threshold 50] [--workers N] \\
        [--clean-splits train valid --ratio 1.5 --min-len 1 --max-len 250]

What each does: ``pipeline_lib/data/learn_subword.py`` and ``pipeline_lib/data/apply_subword.py``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

from pipeline_lib.data.apply_subword import ApplySettings, apply_subword
from pipeline_lib.data.chunk_map import default_workers
from pipeline_lib.data.learn_subword import LearnSettings, learn_subword
from pipeline_lib.data.preprocess import CLEANABLE_SPLITS
from pipeline_lib.errors import ConfigError
from pipeline_lib.lang_code import lang_code


def _check_workers(workers: int) -> None:
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")


def add_learn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="directory with train.{src} / train.{tgt}")
    p.add_argument("--src", required=True, type=lang_code)
    p.add_argument("--tgt", required=True, type=lang_code)
    p.add_argument("--model-dir", required=True, type=Path, help="where codes / spm.model are written")
    p.add_argument("--kind", choices=["bpe", "spm"], default="bpe")
    p.add_argument("--merges", type=int, default=40000, help="BPE merge operations (joint)")
    p.add_argument("--min-frequency", type=int, default=2, help="stop when a pair is rarer (subword-nmt)")
    p.add_argument(
        "--sample-lines",
        type=int,
        default=0,
        help="BPE: learn on a seeded sample of about this many line pairs (0: the whole training text, as "
        "subword-nmt and fairseq's WMT recipes do); bounds the memory, which follows the word types",
    )
    p.add_argument("--sample-seed", type=int, default=1)
    p.add_argument("--spm-type", choices=["unigram", "bpe"], default="unigram")
    p.add_argument("--vocab-size", type=int, default=32000, help="SentencePiece vocabulary size")
    p.add_argument("--character-coverage", type=float, default=1.0)
    p.add_argument("--spm-input-size", type=int, default=10_000_000, help="max sentences SentencePiece reads")
    p.add_argument("--workers", type=int, default=default_workers())


def run_learn(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    _check_workers(args.workers)
    settings = LearnSettings(
        in_dir=args.in_dir,
        src=args.src,
        tgt=args.tgt,
        model_dir=args.model_dir,
        kind=args.kind,
        merges=args.merges,
        min_frequency=args.min_frequency,
        sample_lines=args.sample_lines,
        sample_seed=args.sample_seed,
        spm_type=args.spm_type,
        vocab_size=args.vocab_size,
        character_coverage=args.character_coverage,
        spm_input_size=args.spm_input_size,
        workers=args.workers,
    )
    learn_subword(settings)
    return 0


def add_apply_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="tokenized {split}.{lang} files")
    p.add_argument("--model-dir", required=True, type=Path, help="output of learn-bpe")
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--src", required=True, type=lang_code)
    p.add_argument("--tgt", required=True, type=lang_code)
    p.add_argument("--splits", nargs="+", default=["train", "valid", "test", "mono"])
    p.add_argument("--vocab-threshold", type=int, default=0, help="BPE: subword-nmt --vocabulary-threshold")
    p.add_argument(
        "--clean-splits",
        nargs="*",
        choices=CLEANABLE_SPLITS,
        default=[],
        help="splits cleaned like clean-corpus-n on their subwords (fairseq's WMT'14 En-Fr: train valid)",
    )
    p.add_argument("--ratio", type=float, default=1.5, help="max length ratio (clean-corpus-n -ratio)")
    p.add_argument("--min-len", type=int, default=1, help="min subwords per side")
    p.add_argument("--max-len", type=int, default=250, help="max subwords per side")
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--chunk-size", type=int, default=2000)


def run_apply(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    _check_workers(args.workers)
    settings = ApplySettings(
        in_dir=args.in_dir,
        model_dir=args.model_dir,
        out_dir=args.out_dir,
        src=args.src,
        tgt=args.tgt,
        splits=args.splits,
        vocab_threshold=args.vocab_threshold,
        clean_splits=args.clean_splits,
        ratio=args.ratio,
        min_len=args.min_len,
        max_len=args.max_len,
        workers=args.workers,
        chunk_size=args.chunk_size,
    )
    apply_subword(settings)
    return 0


def commands() -> dict[str, tuple[Callable, Callable]]:
    return {
        "learn-bpe": (add_learn_arguments, run_learn),
        "apply-bpe": (add_apply_arguments, run_apply),
    }
