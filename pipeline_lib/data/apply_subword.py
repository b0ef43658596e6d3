"""The ``apply-bpe`` stage: segment every split with a learnt subword model, optionally cleaning
splits on their subwords (the command line is ``cli_subword.py``).

``apply-bpe`` copies the model files into ``--out-dir`` and writes ``meta.json`` there with
``subword`` (``bpe``/``spm``), the model file names, ``moses_tokenized`` (carried over from the
preprocess ``meta.json``) and the languages: everything the decoder needs to undo it.

``--clean-splits train valid [--ratio 1.5 --min-len 1 --max-len 250]`` cleans those splits after
segmenting, as fairseq's ``prepare-wmt14en2fr.sh:131-132`` runs ``clean-corpus-n.perl`` on the BPE
text (``clean_segmented.py``; SentencePiece pieces are counted the same way). Each gets
``{split}.dropped.tsv`` (preprocess's format: the line in ``--in-dir``'s split file, the reason, the
segmented source and target), and meta.json a ``clean`` block and per-split counts under ``splits``
as preprocess writes them. A cleaned ``valid`` also gets ``valid.ref.{lang}`` and ``valid.tok.{lang}``,
preprocess's original and tokenized text filtered alike, and meta.json keeps preprocess's
``tokenization`` record: scoring on valid reads them. An emptied split is an error.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data.chunk_map import default_workers, scan_file
from pipeline_lib.data.clean_segmented import SplitPaths, segment_and_clean
from pipeline_lib.data.moses import CleanConfig
from pipeline_lib.data.preprocess import CLEANABLE_SPLITS
from pipeline_lib.data.subword import MODEL_META, load_model_meta, segment_file
from pipeline_lib.dataclass_cli import flag_name, option
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.field_spec import check_fields
from pipeline_lib.lang_code import lang_code

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApplySettings:
    """What ``apply-bpe`` does: its flags are these fields (cli_subword.py); ``vocab_threshold`` is
    also a key of a dataset's ``subword:`` block. The cleaning limits come from its ``preprocess:``
    block (``clean_after: bpe``), so they are not keys here."""

    in_dir: Path = option(help="tokenized {split}.{lang} files", type=Path)
    model_dir: Path = option(help="output of learn-bpe", type=Path)
    out_dir: Path = option(help="output directory (segmented text)", type=Path)
    src: str = option(help="source language code", type=lang_code)
    tgt: str = option(help="target language code", type=lang_code)
    splits: tuple[str, ...] = option(("train", "valid", "test", "mono"), "splits to segment", nargs="+")
    vocab_threshold: int = option(
        0,
        "BPE: subword-nmt --vocabulary-threshold (its recommendation: 50; 0: the codes unfiltered, as "
        "fairseq's WMT recipes apply them)",
        subword=True,
        ge=0,
    )
    clean_splits: tuple[str, ...] = option(
        (),
        "splits cleaned like clean-corpus-n on their subwords (fairseq's WMT'14 En-Fr: train valid)",
        choices=CLEANABLE_SPLITS,
    )
    ratio: float = option(1.5, "max length ratio (clean-corpus-n -ratio)", gt=0)
    min_len: int = option(1, "min subwords per side", ge=0)
    max_len: int = option(250, "max subwords per side", ge=1)
    workers: int = option(1, "parallel worker processes", cli_default=default_workers, ge=1)
    chunk_size: int = option(2000, "lines per parallel work unit", ge=1)

    def __post_init__(self) -> None:
        check_fields(self, flag_name)


def _validate(files: list[Path], workers: int) -> None:
    """Fail with a file:line error on invalid UTF-8 or a NUL byte before anything is written."""
    for path in files:
        scan_file(path, workers)


def apply_subword(cfg: ApplySettings) -> None:
    """Segment (and clean) every ``{split}.{lang}`` of ``cfg.in_dir`` into ``cfg.out_dir``, with ``meta.json``."""
    info = load_model_meta(cfg.model_dir)
    kind = info["kind"]
    model_file = info["codes"] if kind == "bpe" else info["model"]
    model_path = cfg.model_dir / model_file
    if cfg.vocab_threshold and kind != "bpe":
        raise ConfigError("--vocab-threshold applies to BPE only (SentencePiece has --vocab-size)")
    jobs = [
        (split, lang)
        for split in cfg.splits
        for lang in (cfg.src, cfg.tgt)
        if (cfg.in_dir / f"{split}.{lang}").is_file()
    ]
    if not jobs:
        raise InputError(f"{cfg.in_dir}: no {{split}}.{{lang}} files for splits {cfg.splits}")
    _validate([cfg.in_dir / f"{split}.{lang}" for split, lang in jobs], cfg.workers)  # before writing
    prev_meta_path = cfg.in_dir / "meta.json"
    prev = json.loads(prev_meta_path.read_text(encoding="utf-8")) if prev_meta_path.is_file() else {}
    clean_cfg = CleanConfig(cfg.ratio, cfg.min_len, cfg.max_len)
    cleaned = [sp for sp in dict.fromkeys(cfg.clean_splits) if any(sp == split for split, _ in jobs)]
    for split, lang in ((sp, lang) for sp in cleaned for lang in (cfg.src, cfg.tgt)):
        if (split, lang) not in jobs:
            raise InputError(
                f"{cfg.in_dir / f'{split}.{lang}'}: not found; --clean-splits {split} needs both sides"
            )
    counts: dict[str, int] = {}
    stats: dict[str, dict] = {}
    cfg.out_dir.mkdir(parents=True, exist_ok=True)  # the scratch files: beside the outputs, not in /tmp
    with AtomicGroup() as group, tempfile.TemporaryDirectory(dir=cfg.out_dir, prefix=".clean-") as scratch:

        def segment(split: str, lang: str, dst: Path) -> int:
            vocab_path = cfg.model_dir / f"vocab.{lang}" if kind == "bpe" and cfg.vocab_threshold else None
            if vocab_path is not None and not vocab_path.is_file():
                raise InputError(f"{vocab_path}: not found; --vocab-threshold needs learn-bpe's vocabularies")
            return segment_file(
                cfg.in_dir / f"{split}.{lang}",
                dst,
                kind=kind,
                model_path=model_path,
                vocab_path=vocab_path,
                threshold=cfg.vocab_threshold,
                workers=cfg.workers,
                chunk_size=cfg.chunk_size,
            )

        for split, lang in jobs:
            if split not in cleaned:
                counts[f"{split}.{lang}"] = segment(
                    split, lang, group.tmp_for(cfg.out_dir / f"{split}.{lang}")
                )
        for split in cleaned:
            paths = SplitPaths(cfg.in_dir, cfg.out_dir, Path(scratch), (cfg.src, cfg.tgt))
            stats[split] = segment_and_clean(paths, split, clean_cfg, group, segment)
            for lang in (cfg.src, cfg.tgt):
                counts[f"{split}.{lang}"] = stats[split]["kept"]
        for name in [model_file, *(f"vocab.{lang}" for lang in (cfg.src, cfg.tgt)), MODEL_META]:
            if (cfg.model_dir / name).is_file() and cfg.model_dir.resolve() != cfg.out_dir.resolve():
                shutil.copyfile(cfg.model_dir / name, group.tmp_for(cfg.out_dir / name))
        meta = {
            "stage": "apply-bpe",
            "subword": kind,
            "model": model_file,
            "vocab_threshold": cfg.vocab_threshold,
            "src_lang": cfg.src,
            "tgt_lang": cfg.tgt,
            "moses_tokenized": bool(prev.get("moses_tokenized", True)),
            "aggressive_dash_splits": bool(prev.get("aggressive_dash_splits", True)),
            "lines": counts,
            "clean": {
                "splits": cleaned,
                "ratio": clean_cfg.ratio,
                "min_len": clean_cfg.min_len,
                "max_len": clean_cfg.max_len,
            },
            "splits": stats,  # preprocess's shape: the report shows them as "<split> (after BPE)"
        }
        if "tokenization" in prev:  # a cleaned valid's bpe/valid.tok.<lang> is scored against it
            meta["tokenization"] = prev["tokenization"]
        group.tmp_for(cfg.out_dir / "meta.json").write_text(
            json.dumps(meta, indent=2) + "\n", encoding="utf-8"
        )
    log.info("segmented %d files into %s", len(counts), cfg.out_dir)
