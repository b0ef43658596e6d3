"""The ``learn-bpe`` stage: a joint subword model (subword-nmt BPE or SentencePiece) learnt on the
training text of both languages (the command line is ``cli_subword.py``).

BPE follows subword-nmt's ``learn-joint-bpe-and-vocab``: word counts of both training sides
are summed, ``--merges`` operations are learnt on them (``codes``), and each language's
segmented training text gives ``vocab.{lang}``. ``--vocab-threshold N`` (subword-nmt's
recommendation: 50) then only produces subwords seen ``>= N`` times in that language's
training text, splitting rarer ones further; 0 (default) applies the codes unfiltered like
fairseq's WMT recipes. ``--sample-lines N`` learns on a seeded sample of about N line pairs
(``line_sample.py``): memory follows the word types, which keep growing with the corpus; the
vocabularies' counts are scaled back to the whole corpus, and ``subword.json`` records the sample.
SentencePiece trains one joint model (``spm.model``) on the raw or normalized text
(``preprocess --no-tokenize``); it has no random seed, and is deterministic as long as the
corpus is under ``--spm-input-size`` sentences (larger corpora are sampled).
"""

from __future__ import annotations

import codecs
import json
import logging
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.atomic import AtomicGroup, write_text
from pipeline_lib.data.chunk_map import default_workers, scan_file
from pipeline_lib.data.line_sample import write_sample
from pipeline_lib.data.subword import MODEL_META
from pipeline_lib.dataclass_cli import flag_name, option
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.field_spec import check_fields
from pipeline_lib.lang_code import lang_code

log = logging.getLogger(__name__)


SUBWORD_KINDS = ("bpe", "spm")


def _subword(default: Any, help: str, **meta: Any) -> Any:
    """A setting that a dataset's ``subword:`` block may also set (its schema key is generated)."""
    return option(default, help, subword=True, **meta)


@dataclass(frozen=True)
class LearnSettings:
    """What ``learn-bpe`` does: its flags are these fields (cli_subword.py), and the fields marked
    ``subword`` are keys of a dataset's ``subword:`` block in the workflow config."""

    in_dir: Path = option(help="directory with train.{src} / train.{tgt}", type=Path)
    src: str = option(help="source language code", type=lang_code)
    tgt: str = option(help="target language code", type=lang_code)
    model_dir: Path = option(help="where codes / spm.model are written", type=Path)
    # The config's keys, in the order the workflow passes them.
    kind: str = _subword("bpe", "bpe: subword-nmt joint BPE; spm: SentencePiece", choices=SUBWORD_KINDS)
    merges: int = _subword(40000, "BPE merge operations (joint)", ge=1)
    min_frequency: int = _subword(2, "BPE: stop when a pair is rarer (subword-nmt)", ge=1)
    sample_lines: int = _subword(
        0,
        "BPE: learn on a seeded sample of about this many line pairs (0: the whole training text, as "
        "subword-nmt and fairseq's WMT recipes do); bounds the memory, which follows the word types",
        ge=0,
    )
    sample_seed: int = _subword(1, "BPE: the seed of --sample-lines' sample")
    spm_type: str = _subword("unigram", "SentencePiece model type", choices=("unigram", "bpe"))
    vocab_size: int = _subword(32000, "SentencePiece vocabulary size", ge=1)
    character_coverage: float = _subword(1.0, "SentencePiece character coverage", gt=0, le=1)
    spm_input_size: int = option(10_000_000, "max sentences SentencePiece reads", ge=1)
    workers: int = option(1, "parallel worker processes", cli_default=default_workers, ge=1)

    def __post_init__(self) -> None:
        check_fields(self, flag_name)


def _learn_bpe(cfg: LearnSettings, files: list[Path]) -> dict:
    from subword_nmt import apply_bpe, learn_bpe

    started = time.perf_counter()
    if cfg.sample_lines > 0:
        per_lang, sample = _sample_word_counts(cfg, files)
    else:
        _validate(files, cfg.workers)
        per_lang, sample = [_word_counts(path, cfg.workers) for path in files], {}
    full_vocab = per_lang[0] + per_lang[1]
    if not full_vocab:
        raise InputError(f"{files[0]}: training text is empty")
    # Phase durations go to the log: bench/scale_data.py reads them to time the serial merge loop apart.
    log.info("phase count %.1fs", time.perf_counter() - started)
    log.info("learning %d joint BPE merges on %d word types", cfg.merges, len(full_vocab))
    with AtomicGroup() as group:
        codes_tmp = group.tmp_for(cfg.model_dir / "codes")
        started = time.perf_counter()
        with codecs.open(str(codes_tmp), "w", encoding="utf-8") as out:
            vocab_list = [f"{w} {c}" for w, c in full_vocab.items()]
            learn_bpe.learn_bpe(vocab_list, out, cfg.merges, cfg.min_frequency, is_dict=True)
        log.info("phase merge %.1fs", time.perf_counter() - started)
        started = time.perf_counter()
        # Per-language vocabularies of the segmented training text, for --vocab-threshold.
        with codecs.open(str(codes_tmp), encoding="utf-8") as codes:
            bpe = apply_bpe.BPE(codes)
        # Segmentation is per word, so each word type is segmented once and weighted by its count:
        # the same vocabularies as segmenting the text, at a cost in types rather than tokens.
        # A sample's counts are scaled to the whole corpus, so that --vocab-threshold keeps its meaning.
        scale = sample["of_lines"] / sample["sample_lines"] if sample else 1.0
        for words, lang in zip(per_lang, (cfg.src, cfg.tgt), strict=True):
            counts: Counter[str] = Counter()
            for word, freq in words.items():
                # subword-nmt counts space-separated words; apply-bpe splits on any whitespace.
                for piece in bpe.segment_tokens(word.split()):
                    counts[piece] += freq
            vocab_tmp = group.tmp_for(cfg.model_dir / f"vocab.{lang}")
            with open(vocab_tmp, "w", encoding="utf-8", newline="\n") as f:
                for tok, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                    f.write(f"{tok} {round(c * scale)}\n")
        n_codes = sum(1 for line in codes_tmp.open(encoding="utf-8") if not line.startswith("#version"))
        log.info("phase vocab %.1fs", time.perf_counter() - started)
    return {"kind": "bpe", "codes": "codes", "merges": cfg.merges, "learned_merges": n_codes, **sample}


def _sample_word_counts(cfg: LearnSettings, files: list[Path]) -> tuple[list[Counter[str]], dict]:
    """Word counts of a seeded sample of the line pairs (validated as read), and what the sample was."""
    cfg.model_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cfg.model_dir, prefix=".sample-") as tmp:
        sampled = [Path(tmp) / path.name for path in files]
        kept, total = write_sample(files, sampled, cfg.sample_lines, cfg.sample_seed)
        if kept == 0:
            raise InputError(f"{files[0]}: the sample of --sample-lines {cfg.sample_lines} is empty")
        log.info("learning on a sample of %d of %d line pairs (seed %d)", kept, total, cfg.sample_seed)
        counts = [_word_counts(path, cfg.workers) for path in sampled]
    return counts, {"sample_lines": kept, "of_lines": total, "sample_seed": cfg.sample_seed}


def _validate(files: list[Path], workers: int) -> None:
    """Fail with a file:line error on invalid UTF-8 or a NUL byte before the learner reads the text.
    The workers decode; the main process only cuts the files into blocks."""
    for path in files:
        scan_file(path, workers)


def _word_counts(path: Path, workers: int) -> Counter[str]:
    from subword_nmt import learn_bpe

    with codecs.open(str(path), encoding="utf-8") as f:
        return learn_bpe.get_vocabulary(f, num_workers=max(1, workers))


def _learn_spm(cfg: LearnSettings, files: list[Path]) -> dict:
    import sentencepiece as spm

    if cfg.vocab_size < 8:
        raise ConfigError(f"--vocab-size must be >= 8, got {cfg.vocab_size}")
    _validate(files, cfg.workers)
    cfg.model_dir.mkdir(parents=True, exist_ok=True)
    # SentencePiece writes <prefix>.model/.vocab itself: it trains in a scratch folder beside the
    # outputs, and the group moves both files into place together.
    with tempfile.TemporaryDirectory(dir=cfg.model_dir, prefix=".spm-") as scratch, AtomicGroup() as group:
        prefix = Path(scratch) / "spm"
        # Ids 0-3 match pipeline_lib.data.vocab (pad, bos, eos, unk), though binarize builds its own
        # vocabulary from the pieces anyway.
        try:
            _train_spm(spm, cfg, files, prefix)
        except RuntimeError as exc:  # e.g. "Vocabulary size too high (N)" for a small corpus
            raise ConfigError(
                f"--vocab-size {cfg.vocab_size}: SentencePiece failed on {files[0]}: {exc}"
            ) from None
        for ext in ("model", "vocab"):
            group.adopt(f"{prefix}.{ext}", cfg.model_dir / f"spm.{ext}")
    return {"kind": "spm", "model": "spm.model", "spm_type": cfg.spm_type, "vocab_size": cfg.vocab_size}


def _train_spm(spm, cfg: LearnSettings, files: list[Path], prefix: Path) -> None:
    spm.SentencePieceTrainer.train(
        input=[str(f) for f in files],
        model_prefix=str(prefix),
        vocab_size=cfg.vocab_size,
        model_type=cfg.spm_type,
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.spm_input_size,
        shuffle_input_sentence=True,
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        num_threads=max(1, cfg.workers),
        minloglevel=1,
    )


def learn_subword(cfg: LearnSettings) -> None:
    """Learn the joint model on ``train.{src}`` and ``train.{tgt}`` and write it with ``subword.json``."""
    files = [cfg.in_dir / f"train.{lang}" for lang in (cfg.src, cfg.tgt)]
    for f in files:
        if not f.is_file():
            raise InputError(f"{f}: training file not found")
    info = _learn_bpe(cfg, files) if cfg.kind == "bpe" else _learn_spm(cfg, files)
    info.update({"src_lang": cfg.src, "tgt_lang": cfg.tgt, "trained_on": [str(f) for f in files]})
    write_text(cfg.model_dir / MODEL_META, json.dumps(info, indent=2) + "\n")
    log.info("wrote %s", cfg.model_dir)
