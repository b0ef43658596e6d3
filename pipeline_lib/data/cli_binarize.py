"""``binarize``: build the joint vocabulary and memory-mapped token ids.

Usage::

    python -m pipeline_lib binarize --in-dir work/demo/bpe --out-dir work/demo/bin \\
        --src en --tgt fr [--threshold 0] [--nwords -1] [--vocab other/vocab.txt]

    # monolingual target text for back-translation, with the parallel data's vocabulary:
    python -m pipeline_lib binarize --in-dir work/demo/bpe --out-dir work/demo/bin-mono \\
        --src fr --splits mono --vocab work/demo/bin/vocab.txt

The vocabulary (``pipeline_lib.data.vocab``) is joint: counts of ``train.{src}`` and
``train.{tgt}`` together, keeping tokens seen ``>= --threshold`` times, at most ``--nwords``
(fairseq's ``--joined-dictionary --thresholdsrc/--nwordssrc``). ``--vocab`` reuses an existing
``vocab.txt`` instead (test sets or monolingual text binarized later must share it).

Output directory (``pipeline_lib.data.indexed``): ``vocab.txt``; ``{split}.{lang}.ids.npy``
(int32, concatenated, no ``</s>``) and ``{split}.{lang}.offsets.npy`` (int64, n+1); and
``meta.json`` with ``src_lang``, ``tgt_lang`` (null when monolingual), ``vocab_sha256``,
``vocab_size``, ``subword``, ``subword_model``, ``moses_tokenized``, and per split the pair
count, token counts and ``<unk>`` rates. The subword model and the bpe ``meta.json`` are copied
in as ``subword/`` so decoding needs nothing outside this directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data.chunk_map import default_workers, map_line_blocks
from pipeline_lib.data.indexed import IndexedDatasetWriter, split_prefix
from pipeline_lib.data.textio import count_lines
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.digest import file_digest
from pipeline_lib.errors import ConfigError, InputError

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="subword-segmented {split}.{lang} files")
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--src", required=True, help="source language (the only one for monolingual data)")
    p.add_argument("--tgt", default=None, help="target language (omit to binarize one language)")
    p.add_argument("--splits", nargs="+", default=["train", "valid", "test"])
    p.add_argument("--threshold", type=int, default=0, help="drop tokens seen fewer times (0: keep all)")
    p.add_argument("--nwords", type=int, default=-1, help="max vocabulary size without specials (-1: all)")
    p.add_argument("--vocab", type=Path, default=None, help="reuse this vocab.txt instead of building one")
    p.add_argument("--workers", type=int, default=default_workers())
    p.add_argument("--chunk-size", type=int, default=5000, help="lines per parallel work unit")


_VOCAB: dict[str, Vocabulary] = {}


def _count_chunk(lines: list[str]) -> tuple[Counter[str], int]:
    counter: Counter[str] = Counter()
    for line in lines:
        counter.update(line.split())
    return counter, len(lines)


def _set_vocab(vocab: Vocabulary) -> None:
    _VOCAB["v"] = vocab


def _encode_chunk(lines: list[str]) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids of all lines concatenated, int32; each line's length; <unk> count). Arrays, so the
    main process receives two buffers per chunk instead of a Python int per token."""
    vocab = _VOCAB["v"]
    lengths = np.empty(len(lines), dtype=np.int64)
    flat: list[int] = []
    for i, line in enumerate(lines):
        ids = vocab.encode(line.split())
        lengths[i] = len(ids)
        flat.extend(ids)
    ids_array = np.array(flat, dtype=np.int32)
    return ids_array, lengths, int(np.count_nonzero(ids_array == vocab.unk))


def _count(paths: dict[Path, int], workers: int, chunk_size: int) -> Counter[str]:
    """Token counts over ``paths`` (path -> its line count, for the progress bar)."""
    counter: Counter[str] = Counter()
    for path, n_lines_total in paths.items():
        bar = tqdm(total=n_lines_total, desc=f"count {path.name}", unit="line", disable=None)
        for part, n_lines in map_line_blocks(_count_chunk, path, workers=workers, chunk_size=chunk_size):
            counter.update(part)
            bar.update(n_lines)
        bar.close()
    return counter


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
    in_dir: Path = args.in_dir
    files = {(s, lang): in_dir / f"{s}.{lang}" for s in args.splits for lang in langs}
    for path in files.values():
        if not path.is_file():
            raise InputError(f"{path}: not found")
    line_counts = {key: count_lines(p) for key, p in files.items()}
    if len(langs) == 2:
        for s in args.splits:
            a, b = line_counts[(s, langs[0])], line_counts[(s, langs[1])]
            if a != b:
                longer = files[(s, langs[1])] if b > a else files[(s, langs[0])]
                raise InputError(f"{longer}:{min(a, b) + 1}: line-count mismatch ({a} vs {b} lines)")

    if args.vocab is not None:
        vocab = Vocabulary.load(args.vocab)
    else:
        train: dict[Path, int] = {}
        for lang in langs:
            t = in_dir / f"train.{lang}"
            if not t.is_file():
                raise InputError(f"{t}: needed to build the vocabulary (or pass --vocab)")
            train[t] = line_counts[("train", lang)] if ("train", lang) in line_counts else count_lines(t)
        vocab = Vocabulary.build(
            _count(train, args.workers, args.chunk_size), threshold=max(1, args.threshold), nwords=args.nwords
        )
    if len(vocab) <= vocab.nspecial:
        raise InputError(f"{in_dir}: the vocabulary is empty (threshold {args.threshold})")
    log.info("vocabulary: %d types (incl. 4 specials)", len(vocab))

    prev_path = in_dir / "meta.json"
    prev = json.loads(prev_path.read_text(encoding="utf-8")) if prev_path.is_file() else {}
    subword = prev.get("subword", "none")
    split_stats: dict[str, dict] = {}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with AtomicGroup() as group:
        for s in args.splits:
            st: dict[str, float | int] = {
                "pairs" if len(langs) == 2 else "sentences": line_counts[(s, langs[0])]
            }
            for lang in langs:
                prefix = split_prefix(args.out_dir, s, lang)
                unk = 0
                # Write under a tmp prefix; AtomicGroup renames both .npy files at the end.
                tmp_prefix = prefix + ".binarizing"
                bar = tqdm(
                    total=line_counts[(s, lang)], desc=f"binarize {s}.{lang}", unit="line", disable=None
                )
                encoded = map_line_blocks(
                    _encode_chunk,
                    files[(s, lang)],
                    workers=args.workers,
                    chunk_size=args.chunk_size,
                    initializer=_set_vocab,
                    initargs=(vocab,),
                )
                with IndexedDatasetWriter(tmp_prefix) as w:
                    for ids, lengths, chunk_unk in encoded:
                        w.add_arrays(ids, lengths)
                        unk += chunk_unk
                        bar.update(len(lengths))
                    ntok = w.num_tokens
                bar.close()
                digest = hashlib.sha256()
                for suffix in (".ids.npy", ".offsets.npy"):
                    digest.update(file_digest(Path(tmp_prefix + suffix)).encode())
                    group.adopt(tmp_prefix + suffix, prefix + suffix)
                st[f"{lang}_sha256"] = digest.hexdigest()
                st[f"{lang}_tokens"] = ntok
                st[f"{lang}_unk"] = unk
                st[f"{lang}_unk_rate"] = unk / ntok if ntok else 0.0
            split_stats[s] = st
            log.info("%s: %s", s, st)
        vocab_tmp = group.tmp_for(args.out_dir / "vocab.txt")
        vocab.save(vocab_tmp)
        # Keep the subword model with the data, so the decoder can segment/undo without in_dir.
        model_name = prev.get("model")
        subword_model = None
        if model_name and (in_dir / model_name).is_file():
            subword_model = f"subword/{model_name}"
            shutil.copyfile(in_dir / model_name, group.tmp_for(args.out_dir / subword_model))
        if prev_path.is_file():
            shutil.copyfile(prev_path, group.tmp_for(args.out_dir / "subword" / "meta.json"))
        meta = {
            "src_lang": args.src,
            "tgt_lang": args.tgt,
            "vocab_sha256": vocab.sha256(),
            "vocab_size": len(vocab),
            "vocab_threshold": args.threshold,
            "vocab_reused_from": str(args.vocab) if args.vocab else None,
            "subword": subword,
            "subword_model": subword_model,
            "moses_tokenized": bool(prev.get("moses_tokenized", False)),
            "aggressive_dash_splits": bool(prev.get("aggressive_dash_splits", False)),
            "eos_stored": False,
            "splits": split_stats,
        }
        group.tmp_for(args.out_dir / "meta.json").write_text(
            json.dumps(meta, indent=2) + "\n", encoding="utf-8"
        )
    return 0
