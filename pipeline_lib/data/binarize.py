"""The ``binarize`` stage: the joint vocabulary and memory-mapped token ids (the command line is
``cli_binarize.py``).

The vocabulary (``pipeline_lib.data.vocab``) is joint: counts of ``train.{src}`` and
``train.{tgt}`` together, keeping tokens seen ``>= --threshold`` times, at most ``--nwords``
(fairseq's ``--joined-dictionary --thresholdsrc/--nwordssrc``). ``--vocab`` reuses an existing
``vocab.txt`` instead (test sets or monolingual text binarized later must share it).

Output directory (``pipeline_lib.data.indexed``): ``vocab.txt``; ``{split}.{lang}.ids.npy``
(int32, concatenated, no ``</s>``) and ``{split}.{lang}.offsets.npy`` (int64, n+1); and
``meta.json`` with ``src_lang``, ``tgt_lang`` (null when monolingual), ``vocab_sha256``,
``vocab_size``, ``subword``, ``subword_model``, ``moses_tokenized``, and per split the pair
count, token counts, ``<unk>`` rates and ``{lang}_sha256``, and ``file_bytes`` (each id file's
size): loading a split checks both (``pipeline_lib.data.integrity``). The subword model and the bpe ``meta.json`` are copied
in as ``subword/`` so decoding needs nothing outside this directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data.chunk_map import default_workers, map_line_blocks
from pipeline_lib.data.indexed import IndexedDatasetWriter, split_prefix
from pipeline_lib.data.textio import count_lines
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.dataclass_cli import flag_name, option
from pipeline_lib.digest import file_digest
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.field_spec import check_fields
from pipeline_lib.lang_code import lang_code

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BinarizeSettings:
    """What ``binarize`` does: its flags are these fields (cli_binarize.py), and the fields marked
    ``binarize`` are the keys of a dataset's ``binarize:`` block in the workflow config."""

    in_dir: Path = option(help="subword-segmented {split}.{lang} files", type=Path)
    out_dir: Path = option(help="output directory", type=Path)
    src: str = option(help="source language (the only one for monolingual data)", type=lang_code)
    tgt: str | None = option(None, "target language (omit to binarize one language)", type=lang_code)
    # The config's keys, in the order the workflow passes them.
    threshold: int = option(0, "drop tokens seen fewer times (0: keep all)", binarize=True, ge=0)
    nwords: int = option(-1, "max vocabulary size without specials (-1: all)", binarize=True, ge=-1)
    splits: tuple[str, ...] = option(("train", "valid", "test"), "splits to binarize", nargs="+")
    vocab: Path | None = option(None, "reuse this vocab.txt instead of building one", type=Path)
    workers: int = option(1, "parallel worker processes", cli_default=default_workers, ge=1)
    chunk_size: int = option(5000, "lines per parallel work unit", ge=1)

    def __post_init__(self) -> None:
        check_fields(self, flag_name)
        if self.src == self.tgt:
            raise ConfigError("--src and --tgt must differ")


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


def binarize(cfg: BinarizeSettings) -> None:
    """Binarize ``cfg.splits`` of ``cfg.in_dir`` into ``cfg.out_dir`` with a built or reused vocabulary."""
    langs = [cfg.src] if cfg.tgt is None else [cfg.src, cfg.tgt]
    in_dir: Path = cfg.in_dir
    files = {(s, lang): in_dir / f"{s}.{lang}" for s in cfg.splits for lang in langs}
    for path in files.values():
        if not path.is_file():
            raise InputError(f"{path}: not found")
    line_counts = {key: count_lines(p) for key, p in files.items()}
    if len(langs) == 2:
        for s in cfg.splits:
            a, b = line_counts[(s, langs[0])], line_counts[(s, langs[1])]
            if a != b:
                longer = files[(s, langs[1])] if b > a else files[(s, langs[0])]
                raise InputError(f"{longer}:{min(a, b) + 1}: line-count mismatch ({a} vs {b} lines)")

    if cfg.vocab is not None:
        vocab = Vocabulary.load(cfg.vocab)
    else:
        train: dict[Path, int] = {}
        for lang in langs:
            t = in_dir / f"train.{lang}"
            if not t.is_file():
                raise InputError(f"{t}: needed to build the vocabulary (or pass --vocab)")
            train[t] = line_counts[("train", lang)] if ("train", lang) in line_counts else count_lines(t)
        vocab = Vocabulary.build(
            _count(train, cfg.workers, cfg.chunk_size), threshold=max(1, cfg.threshold), nwords=cfg.nwords
        )
    if len(vocab) <= vocab.nspecial:
        raise InputError(f"{in_dir}: the vocabulary is empty (threshold {cfg.threshold})")
    log.info("vocabulary: %d types (incl. 4 specials)", len(vocab))

    prev_path = in_dir / "meta.json"
    prev = json.loads(prev_path.read_text(encoding="utf-8")) if prev_path.is_file() else {}
    subword = prev.get("subword", "none")
    split_stats: dict[str, dict] = {}
    file_bytes: dict[str, int] = {}
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    with AtomicGroup() as group:
        for s in cfg.splits:
            st: dict[str, float | int] = {
                "pairs" if len(langs) == 2 else "sentences": line_counts[(s, langs[0])]
            }
            for lang in langs:
                prefix = split_prefix(cfg.out_dir, s, lang)
                unk = 0
                # Write under a tmp prefix; AtomicGroup renames both .npy files at the end.
                tmp_prefix = prefix + ".binarizing"
                bar = tqdm(
                    total=line_counts[(s, lang)], desc=f"binarize {s}.{lang}", unit="line", disable=None
                )
                encoded = map_line_blocks(
                    _encode_chunk,
                    files[(s, lang)],
                    workers=cfg.workers,
                    chunk_size=cfg.chunk_size,
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
                    file_bytes[Path(prefix + suffix).name] = os.path.getsize(tmp_prefix + suffix)
                    group.adopt(tmp_prefix + suffix, prefix + suffix)
                st[f"{lang}_sha256"] = digest.hexdigest()
                st[f"{lang}_tokens"] = ntok
                st[f"{lang}_unk"] = unk
                st[f"{lang}_unk_rate"] = unk / ntok if ntok else 0.0
            split_stats[s] = st
            log.info("%s: %s", s, st)
        vocab_tmp = group.tmp_for(cfg.out_dir / "vocab.txt")
        vocab.save(vocab_tmp)
        # Keep the subword model with the data, so the decoder can segment/undo without in_dir.
        model_name = prev.get("model")
        subword_model = None
        if model_name and (in_dir / model_name).is_file():
            subword_model = f"subword/{model_name}"
            shutil.copyfile(in_dir / model_name, group.tmp_for(cfg.out_dir / subword_model))
        if prev_path.is_file():
            shutil.copyfile(prev_path, group.tmp_for(cfg.out_dir / "subword" / "meta.json"))
        meta = {
            "src_lang": cfg.src,
            "tgt_lang": cfg.tgt,
            "vocab_sha256": vocab.sha256(),
            "vocab_size": len(vocab),
            "vocab_threshold": cfg.threshold,
            "vocab_reused_from": str(cfg.vocab) if cfg.vocab else None,
            "subword": subword,
            "subword_model": subword_model,
            "moses_tokenized": bool(prev.get("moses_tokenized", False)),
            "aggressive_dash_splits": bool(prev.get("aggressive_dash_splits", False)),
            "eos_stored": False,
            "splits": split_stats,
            # checked when a split is loaded (data/integrity.py); not in `splits`, which is part of
            # a training run's identity
            "file_bytes": file_bytes,
        }
        group.tmp_for(cfg.out_dir / "meta.json").write_text(
            json.dumps(meta, indent=2) + "\n", encoding="utf-8"
        )
