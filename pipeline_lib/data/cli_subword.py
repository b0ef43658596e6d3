"""``learn-bpe`` / ``apply-bpe``: joint subword segmentation (subword-nmt BPE or SentencePiece).

Learn (on the train split of both languages, jointly)::

    python -m pipeline_lib learn-bpe --in-dir work/demo/tok --src en --tgt fr \\
        --model-dir work/demo/subword --merges 10000            # subword-nmt joint BPE
    python -m pipeline_lib learn-bpe ... --kind spm --spm-type unigram --vocab-size 8000

Apply (every ``{split}.{lang}`` and ``mono.{lang}`` file of ``--in-dir``, chunk-parallel)::

    python -m pipeline_lib apply-bpe --in-dir work/demo/tok --model-dir work/demo/subword \\
        --out-dir work/demo/bpe --src en --tgt fr [--vocab-threshold 50] [--workers N] \\
        [--clean-splits train valid --ratio 1.5 --min-len 1 --max-len 250]

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

import argparse
import codecs
import json
import logging
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup, write_text
from pipeline_lib.data.chunk_map import default_workers, scan_file
from pipeline_lib.data.clean_segmented import CLEANABLE_SPLITS, SplitPaths, segment_and_clean
from pipeline_lib.data.line_sample import write_sample
from pipeline_lib.data.moses import CleanConfig
from pipeline_lib.data.subword import MODEL_META, load_model_meta, segment_file
from pipeline_lib.errors import ConfigError, InputError

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------
# learning
# ------------------------------------------------------------------------------------------
def add_learn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="directory with train.{src} / train.{tgt}")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
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


def _learn_bpe(args: argparse.Namespace, files: list[Path]) -> dict:
    from subword_nmt import apply_bpe, learn_bpe

    if args.merges < 1:
        raise ConfigError(f"--merges must be >= 1, got {args.merges}")
    if args.sample_lines < 0:
        raise ConfigError(f"--sample-lines must be >= 0, got {args.sample_lines}")
    started = time.perf_counter()
    if args.sample_lines > 0:
        per_lang, sample = _sample_word_counts(args, files)
    else:
        _validate(files, args.workers)
        per_lang, sample = [_word_counts(path, args.workers) for path in files], {}
    full_vocab = per_lang[0] + per_lang[1]
    if not full_vocab:
        raise InputError(f"{files[0]}: training text is empty")
    # Phase durations go to the log: bench/scale_data.py reads them to time the serial merge loop apart.
    log.info("phase count %.1fs", time.perf_counter() - started)
    log.info("learning %d joint BPE merges on %d word types", args.merges, len(full_vocab))
    with AtomicGroup() as group:
        codes_tmp = group.tmp_for(args.model_dir / "codes")
        started = time.perf_counter()
        with codecs.open(str(codes_tmp), "w", encoding="utf-8") as out:
            vocab_list = [f"{w} {c}" for w, c in full_vocab.items()]
            learn_bpe.learn_bpe(vocab_list, out, args.merges, args.min_frequency, is_dict=True)
        log.info("phase merge %.1fs", time.perf_counter() - started)
        started = time.perf_counter()
        # Per-language vocabularies of the segmented training text, for --vocab-threshold.
        with codecs.open(str(codes_tmp), encoding="utf-8") as codes:
            bpe = apply_bpe.BPE(codes)
        # Segmentation is per word, so each word type is segmented once and weighted by its count:
        # the same vocabularies as segmenting the text, at a cost in types rather than tokens.
        # A sample's counts are scaled to the whole corpus, so that --vocab-threshold keeps its meaning.
        scale = sample["of_lines"] / sample["sample_lines"] if sample else 1.0
        for words, lang in zip(per_lang, (args.src, args.tgt), strict=True):
            counts: Counter[str] = Counter()
            for word, freq in words.items():
                # subword-nmt counts space-separated words; apply-bpe splits on any whitespace.
                for piece in bpe.segment_tokens(word.split()):
                    counts[piece] += freq
            vocab_tmp = group.tmp_for(args.model_dir / f"vocab.{lang}")
            with open(vocab_tmp, "w", encoding="utf-8", newline="\n") as f:
                for tok, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                    f.write(f"{tok} {round(c * scale)}\n")
        n_codes = sum(1 for line in codes_tmp.open(encoding="utf-8") if not line.startswith("#version"))
        log.info("phase vocab %.1fs", time.perf_counter() - started)
    return {"kind": "bpe", "codes": "codes", "merges": args.merges, "learned_merges": n_codes, **sample}


def _sample_word_counts(args: argparse.Namespace, files: list[Path]) -> tuple[list[Counter[str]], dict]:
    """Word counts of a seeded sample of the line pairs (validated as read), and what the sample was."""
    args.model_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.model_dir, prefix=".sample-") as tmp:
        sampled = [Path(tmp) / path.name for path in files]
        kept, total = write_sample(files, sampled, args.sample_lines, args.sample_seed)
        if kept == 0:
            raise InputError(f"{files[0]}: the sample of --sample-lines {args.sample_lines} is empty")
        log.info("learning on a sample of %d of %d line pairs (seed %d)", kept, total, args.sample_seed)
        counts = [_word_counts(path, args.workers) for path in sampled]
    return counts, {"sample_lines": kept, "of_lines": total, "sample_seed": args.sample_seed}


def _validate(files: list[Path], workers: int) -> None:
    """Fail with a file:line error on invalid UTF-8 or a NUL byte before the learner reads the text.
    The workers decode; the main process only cuts the files into blocks."""
    for path in files:
        scan_file(path, workers)


def _word_counts(path: Path, workers: int) -> Counter[str]:
    from subword_nmt import learn_bpe

    with codecs.open(str(path), encoding="utf-8") as f:
        return learn_bpe.get_vocabulary(f, num_workers=max(1, workers))


def _learn_spm(args: argparse.Namespace, files: list[Path]) -> dict:
    import sentencepiece as spm

    if args.vocab_size < 8:
        raise ConfigError(f"--vocab-size must be >= 8, got {args.vocab_size}")
    _validate(files, args.workers)
    args.model_dir.mkdir(parents=True, exist_ok=True)
    # SentencePiece writes <prefix>.model/.vocab itself: it trains in a scratch folder beside the
    # outputs, and the group moves both files into place together.
    with tempfile.TemporaryDirectory(dir=args.model_dir, prefix=".spm-") as scratch, AtomicGroup() as group:
        prefix = Path(scratch) / "spm"
        # Ids 0-3 match pipeline_lib.data.vocab (pad, bos, eos, unk), though binarize builds its own
        # vocabulary from the pieces anyway.
        try:
            _train_spm(spm, args, files, prefix)
        except RuntimeError as exc:  # e.g. "Vocabulary size too high (N)" for a small corpus
            raise ConfigError(
                f"--vocab-size {args.vocab_size}: SentencePiece failed on {files[0]}: {exc}"
            ) from None
        for ext in ("model", "vocab"):
            group.adopt(f"{prefix}.{ext}", args.model_dir / f"spm.{ext}")
    return {"kind": "spm", "model": "spm.model", "spm_type": args.spm_type, "vocab_size": args.vocab_size}


def _train_spm(spm, args: argparse.Namespace, files: list[Path], prefix: Path) -> None:
    spm.SentencePieceTrainer.train(
        input=[str(f) for f in files],
        model_prefix=str(prefix),
        vocab_size=args.vocab_size,
        model_type=args.spm_type,
        character_coverage=args.character_coverage,
        input_sentence_size=args.spm_input_size,
        shuffle_input_sentence=True,
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        num_threads=max(1, args.workers),
        minloglevel=1,
    )


def run_learn(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    files = [args.in_dir / f"train.{lang}" for lang in (args.src, args.tgt)]
    for f in files:
        if not f.is_file():
            raise InputError(f"{f}: training file not found")
    info = _learn_bpe(args, files) if args.kind == "bpe" else _learn_spm(args, files)
    info.update({"src_lang": args.src, "tgt_lang": args.tgt, "trained_on": [str(f) for f in files]})
    write_text(args.model_dir / MODEL_META, json.dumps(info, indent=2) + "\n")
    log.info("wrote %s", args.model_dir)
    return 0


# ------------------------------------------------------------------------------------------
# applying
# ------------------------------------------------------------------------------------------
def add_apply_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--in-dir", required=True, type=Path, help="tokenized {split}.{lang} files")
    p.add_argument("--model-dir", required=True, type=Path, help="output of learn-bpe")
    p.add_argument("--out-dir", required=True, type=Path)
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
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
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    info = load_model_meta(args.model_dir)
    kind = info["kind"]
    model_file = info["codes"] if kind == "bpe" else info["model"]
    model_path = args.model_dir / model_file
    if args.vocab_threshold and kind != "bpe":
        raise ConfigError("--vocab-threshold applies to BPE only (SentencePiece has --vocab-size)")
    jobs = [
        (split, lang)
        for split in args.splits
        for lang in (args.src, args.tgt)
        if (args.in_dir / f"{split}.{lang}").is_file()
    ]
    if not jobs:
        raise InputError(f"{args.in_dir}: no {{split}}.{{lang}} files for splits {args.splits}")
    _validate([args.in_dir / f"{split}.{lang}" for split, lang in jobs], args.workers)  # before writing
    prev_meta_path = args.in_dir / "meta.json"
    prev = json.loads(prev_meta_path.read_text(encoding="utf-8")) if prev_meta_path.is_file() else {}
    clean_cfg = CleanConfig(args.ratio, args.min_len, args.max_len)
    cleaned = [sp for sp in dict.fromkeys(args.clean_splits) if any(sp == split for split, _ in jobs)]
    for split, lang in ((sp, lang) for sp in cleaned for lang in (args.src, args.tgt)):
        if (split, lang) not in jobs:
            raise InputError(
                f"{args.in_dir / f'{split}.{lang}'}: not found; --clean-splits {split} needs both sides"
            )
    counts: dict[str, int] = {}
    stats: dict[str, dict] = {}
    args.out_dir.mkdir(parents=True, exist_ok=True)  # the scratch files: beside the outputs, not in /tmp
    with AtomicGroup() as group, tempfile.TemporaryDirectory(dir=args.out_dir, prefix=".clean-") as scratch:

        def segment(split: str, lang: str, dst: Path) -> int:
            vocab_path = args.model_dir / f"vocab.{lang}" if kind == "bpe" and args.vocab_threshold else None
            if vocab_path is not None and not vocab_path.is_file():
                raise InputError(f"{vocab_path}: not found; --vocab-threshold needs learn-bpe's vocabularies")
            return segment_file(
                args.in_dir / f"{split}.{lang}",
                dst,
                kind=kind,
                model_path=model_path,
                vocab_path=vocab_path,
                threshold=args.vocab_threshold,
                workers=args.workers,
                chunk_size=args.chunk_size,
            )

        for split, lang in jobs:
            if split not in cleaned:
                counts[f"{split}.{lang}"] = segment(
                    split, lang, group.tmp_for(args.out_dir / f"{split}.{lang}")
                )
        for split in cleaned:
            paths = SplitPaths(args.in_dir, args.out_dir, Path(scratch), (args.src, args.tgt))
            stats[split] = segment_and_clean(paths, split, clean_cfg, group, segment)
            for lang in (args.src, args.tgt):
                counts[f"{split}.{lang}"] = stats[split]["kept"]
        for name in [model_file, *(f"vocab.{lang}" for lang in (args.src, args.tgt)), MODEL_META]:
            if (args.model_dir / name).is_file() and args.model_dir.resolve() != args.out_dir.resolve():
                shutil.copyfile(args.model_dir / name, group.tmp_for(args.out_dir / name))
        meta = {
            "stage": "apply-bpe",
            "subword": kind,
            "model": model_file,
            "vocab_threshold": args.vocab_threshold,
            "src_lang": args.src,
            "tgt_lang": args.tgt,
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
        group.tmp_for(args.out_dir / "meta.json").write_text(
            json.dumps(meta, indent=2) + "\n", encoding="utf-8"
        )
    log.info("segmented %d files into %s", len(counts), args.out_dir)
    return 0


def commands() -> dict[str, tuple[Callable, Callable]]:
    return {
        "learn-bpe": (add_learn_arguments, run_learn),
        "apply-bpe": (add_apply_arguments, run_apply),
    }
