"""The ``preprocess`` stage: Moses normalize/tokenize and clean a raw ``{split}.{lang}`` directory
(the command line is ``cli_preprocess.py``).

What happens to each split follows fairseq's ``prepare-wmt14en2fr.sh``: train and valid are
normalized, stripped of non-printing characters and tokenized with ``-a``; test, as the scripts'
test branch does it, only gets ``sed "s/’/'/g"`` and ``-a`` tokenization (no normalization, so the
tokenized reference is the one the papers' tokenized BLEU was computed on; ``--normalize-test``
treats test like train). The ``--clean-splits`` (default ``train`` and ``valid``) are then cleaned like
``clean-corpus-n.perl -ratio 1.5 ... 1 250`` on Moses tokens; ``test`` is never cleaned (its lines must
stay aligned with the reference). ``--clean-after bpe`` leaves that to ``apply-bpe``, which counts
subwords as fairseq's ``prepare-wmt14en2fr.sh`` does (clean_segmented.py): here those splits then
lose only empty lines and lines over ``--hard-limit`` raw tokens, which no segmentation can save (it
only splits tokens), and ``--ratio/--min-len/--max-len`` apply to mono alone. ``--valid-every 1333`` carves the
valid split out of train (every 1333rd line) when the corpus ships no dev set.
A ``mono.{tgt}`` (or ``mono.{src}``) file, if present, is tokenized and length-cleaned on
its own, for back-translation.

Bad input stops the stage before anything is written: a source/target line-count mismatch
or invalid UTF-8 is reported as ``file:line``; a cleaned split left empty is an error. Lines
longer than ``--hard-limit`` tokens (10k) are dropped untokenized and counted.

Outputs: ``{split}.{lang}`` plus ``meta.json`` (languages, ``moses_tokenized``, settings,
per-split counts of kept and dropped pairs by reason). Each cleaned split also gets
``{split}.dropped.tsv`` (``mono.{lang}.dropped.tsv``), named in meta.json as the split's
``dropped_file``: one row per dropped pair with its 1-based line number in the raw input, the
reason (the meta.json counter's name) and the raw source and target, each cut at
``DROPPED_TEXT_CHARS`` characters (a cut ends in ``…``; a tab in the text is written ``\\t``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data import moses
from pipeline_lib.data.chunk_map import default_workers, map_chunks, scan_file
from pipeline_lib.data.textio import read_lines, read_parallel
from pipeline_lib.dataclass_cli import flag_name, option
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.field_spec import check_fields
from pipeline_lib.lang_code import lang_code

log = logging.getLogger(__name__)

EVAL_SPLITS = ("valid", "test")
CLEANABLE_SPLITS = ("train", "valid")  # test never: its lines stay aligned with the reference
CLEAN_AFTER = ("tokenize", "bpe")


# Cleaning that removes more than this share of a split is worth a look (wrong --ratio for the
# language pair, misaligned files): warned about in the log, in meta.json and in the report.
CLEANING_WARNING_SHARE = 0.2

# Enough of a dropped line to recognize it and grep for it; a 10k-token line would bloat the list.
DROPPED_TEXT_CHARS = 200


def _config(default: Any, help: str, **meta: Any) -> Any:
    """A setting that a dataset's ``preprocess:`` block may also set (its schema key is generated)."""
    return option(default, help, preprocess=True, **meta)


@dataclass(frozen=True)
class PreprocessSettings:
    """What ``preprocess`` does: its flags are these fields (cli_preprocess.py), and the fields marked
    ``preprocess`` are the keys of a dataset's ``preprocess:`` block in the workflow config."""

    in_dir: Path = option(help="directory with raw {split}.{lang} files", type=Path)
    out_dir: Path = option(help="output directory (tokenized text)", type=Path)
    src: str = option(help="source language code (en)", type=lang_code)
    tgt: str = option(help="target language code (fr)", type=lang_code)
    splits: tuple[str, ...] = option(
        ("train", "valid", "test", "mono"), "splits to process (mono: mono.{lang} files, where present)",
        nargs="+",
    )  # fmt: skip
    # The config's keys, in the order the workflow passes them.
    ratio: float = _config(1.5, "max length ratio (clean-corpus-n -ratio)", gt=0)
    min_len: int = _config(1, "min tokens per side", ge=0)
    max_len: int = _config(250, "max tokens per side", ge=1)
    hard_limit: int = _config(10_000, "drop lines over this many raw tokens, untokenized", ge=1)
    clean_after: str = _config(
        "tokenize",
        "where clean-corpus-n (ratio, min/max len) counts. tokenize: Moses tokens, here; bpe: subwords, "
        "in apply-bpe (fairseq's WMT'14 En-Fr), so the cleaned splits here only lose empty and "
        "--hard-limit lines",
        choices=CLEAN_AFTER,
    )
    valid_every: int = _config(0, "carve valid from every N-th train line (0: the corpus's own)", ge=0)
    dedup: bool = _config(False, "drop repeated (source, target) pairs in cleaned splits")
    normalize_test: bool = _config(
        False,
        "normalize test like train (default: fairseq's test branch, sed s/’/'/g + tokenizer -a only, "
        "the reference the papers' tokenized BLEU used)",
    )
    normalize: bool = _config(
        True,
        "skip Moses normalize-punctuation on train/valid (IWSLT'14's recipe)",
        flag="--no-normalize",
        doc="Moses normalize-punctuation on train/valid (IWSLT'14's recipe: false)",
    )
    aggressive: bool = _config(
        True,
        "tokenize without -a (hyphens kept whole; IWSLT'14's recipe)",
        flag="--no-aggressive",
        doc="tokenizer -a, hyphens split as @-@ (IWSLT'14's recipe: false)",
    )
    lowercase: bool = _config(False, "lowercase every split after tokenizing (IWSLT'14's recipe)")
    max_train_lines: int | None = _config(None, "keep only the first N training pairs", ge=1)
    clean_splits: tuple[str, ...] = _config(
        ("train", "valid"),
        "splits filtered by clean-corpus-n (test never is; an empty list: none)",
        choices=CLEANABLE_SPLITS,
    )
    # The workflow derives tokenize from the subword kind (SentencePiece reads raw text).
    tokenize: bool = option(
        True, "normalize only, no Moses tokenizer (for SentencePiece on raw text)", flag="--no-tokenize"
    )
    workers: int = option(1, "parallel worker processes", cli_default=default_workers, ge=1)
    chunk_size: int = option(2000, "lines per parallel work unit", ge=1)

    def __post_init__(self) -> None:
        check_fields(self, flag_name)
        if self.src == self.tgt:
            raise ConfigError("--src and --tgt must differ")
        self.clean  # noqa: B018 -- CleanConfig checks min_len <= max_len

    @property
    def tok(self) -> moses.TokConfig:
        return moses.TokConfig(
            normalize=self.normalize,
            tokenize=self.tokenize,
            aggressive_dash_splits=self.aggressive,
            lowercase=self.lowercase,
        )

    @property
    def clean(self) -> moses.CleanConfig:
        return moses.CleanConfig(self.ratio, self.min_len, self.max_len, self.hard_limit)


def cleaning_warning(split: str, n_in: int, n_out: int, reasons: dict[str, int]) -> str | None:
    """A warning naming the split, the count and the filter that removed the most, if over the share."""
    removed = n_in - n_out
    if not n_in or removed / n_in <= CLEANING_WARNING_SHARE:
        return None
    top, count = max(reasons.items(), key=lambda kv: kv[1]) if reasons else ("?", removed)
    return (
        f"cleaning removed {removed:,} of {n_in:,} {split} pairs ({100 * removed / n_in:.0f}%, more than "
        f"{100 * CLEANING_WARNING_SHARE:.0f}%), most by {top} ({count:,}): check --ratio/--min-len/--max-len "
        f"and that the two sides are aligned"
    )


def excerpt(text: str) -> str:
    """A raw line as one TSV field: tabs escaped, cut at ``DROPPED_TEXT_CHARS`` characters."""
    text = text.replace("\t", "\\t")
    return text if len(text) <= DROPPED_TEXT_CHARS else text[: DROPPED_TEXT_CHARS - 1] + "…"


# (1-based line number in the raw input, reason, excerpts of the raw columns)
Dropped = tuple[int, str, tuple[str, ...]]


def clean_numbered_chunk(
    items: list[tuple[int, tuple[str, ...]]],
) -> tuple[list[tuple[str, ...] | None], Counter[str], list[Dropped]]:
    """``moses.process_chunk`` on numbered rows, also returning each dropped row with its reason
    (a worker function: the pool's initializer is ``moses.init_worker``). Rows go through one at a
    time so that the one-row counter is the row's reason; the tokenizer, not this, is the cost."""
    out: list[tuple[str, ...] | None] = []
    stats: Counter[str] = Counter()
    dropped: list[Dropped] = []
    for lineno, row in items:
        (result,), why = moses.process_chunk([row])
        out.append(result)
        stats.update(why)
        if result is None:
            dropped.append((lineno, next(iter(why)), tuple(excerpt(col) for col in row)))
    return out, stats, dropped


def _pair_key(row: tuple[str, ...]) -> bytes:
    return hashlib.blake2b("\t".join(row).encode("utf-8"), digest_size=12).digest()


class _Split:
    """Where the rows of one split come from (maybe a slice of train)."""

    def __init__(
        self, name: str, files: list[Path], every: int = 0, take: bool = True, limit: int | None = None
    ) -> None:
        self.name, self.files, self.every, self.take, self.limit = name, files, every, take, limit

    def numbered_rows(self) -> Iterator[tuple[int, tuple[str, ...]]]:
        """(1-based line number in the raw files, row) of the split's rows."""
        it = read_parallel(*self.files) if len(self.files) == 2 else ((s,) for s in read_lines(self.files[0]))
        kept = 0
        for i, row in enumerate(it, 1):
            if self.every and (i % self.every == 0) != self.take:
                continue
            if self.limit is not None and kept >= self.limit:
                return
            kept += 1
            yield i, row

    def rows(self) -> Iterator[tuple[str, ...]]:
        return (row for _, row in self.numbered_rows())


def preprocess(cfg: PreprocessSettings) -> None:
    """Tokenize and clean ``cfg.in_dir`` into ``cfg.out_dir``; every input is checked before anything is written."""
    in_dir: Path = cfg.in_dir
    langs = (cfg.src, cfg.tgt)

    # -- plan and validate every input before writing anything -----------------------------
    plan: list[_Split] = []
    for split in cfg.splits:
        if split == "mono":
            continue
        files = [in_dir / f"{split}.{lang}" for lang in langs]
        if split == "valid" and cfg.valid_every and not files[0].exists():
            train = [in_dir / f"train.{lang}" for lang in langs]
            plan.append(_Split("valid", train, cfg.valid_every, take=True))
            continue
        limit = cfg.max_train_lines if split == "train" else None
        if split == "train" and cfg.valid_every and not (in_dir / f"valid.{cfg.src}").exists():
            plan.append(_Split("train", files, cfg.valid_every, take=False, limit=limit))
            continue
        plan.append(_Split(split, files, limit=limit))
    for lang in langs if "mono" in cfg.splits else ():
        mono = in_dir / f"mono.{lang}"
        if mono.exists():
            plan.append(_Split("mono", [mono]))
    scanned: dict[Path, tuple[int, int, bool]] = {}  # a valid split drawn from train reads the same files
    for sp in plan:
        for f in sp.files:  # bad input fails here, before any work
            if f not in scanned:
                scanned[f] = scan_file(f, cfg.workers)
        scans = [scanned[f] for f in sp.files]
        counts = [lines for lines, _, _ in scans]
        sp.crlf = sum(crlf for _, crlf, _ in scans)  # type: ignore[attr-defined]
        sp.bom = sum(bom for _, _, bom in scans)  # type: ignore[attr-defined]
        if len(counts) == 2 and counts[0] != counts[1]:
            short, long_ = (0, 1) if counts[0] < counts[1] else (1, 0)
            raise InputError(
                f"{sp.files[long_]}:{counts[short] + 1}: line-count mismatch, {sp.files[long_]} has "
                f"{counts[long_]} lines but {sp.files[short]} has {counts[short]}"
            )
        sp.total = counts[0] if sp.limit is None else min(counts[0], sp.limit)  # type: ignore[attr-defined]

    created = not cfg.out_dir.exists()
    try:
        _write(cfg, plan, langs)
    except BaseException:
        # A failed stage leaves no directory behind that could pass for its output.
        if created and cfg.out_dir.is_dir() and not any(cfg.out_dir.iterdir()):
            cfg.out_dir.rmdir()
        raise


def _write_dropped(out: IO[str] | None, dropped: Dropped) -> None:
    if out is not None:  # None: an uncleaned split, which drops nothing
        lineno, reason, cols = dropped
        out.write("\t".join((str(lineno), reason, *cols)))
        out.write("\n")


def guard_config(hard_limit: int) -> moses.CleanConfig:
    """What a split cleaned after BPE loses here: only what clean-corpus-n would drop on its subwords
    whatever the segmentation. Tokenizing and segmenting only split tokens, so an empty line stays
    empty and a line over ``hard_limit`` (> max_len) raw tokens stays over max_len."""
    return moses.CleanConfig(ratio=math.inf, min_len=0, max_len=sys.maxsize, hard_limit=hard_limit)


def _tok_config(split: str, tok_cfg: moses.TokConfig, normalize_test: bool) -> moses.TokConfig:
    """Test sets of the Moses path get the fairseq scripts' test treatment (see module docstring)."""
    if split != "test" or normalize_test or not tok_cfg.tokenize:
        return tok_cfg
    return replace(
        moses.FAIRSEQ_TEST, aggressive_dash_splits=tok_cfg.aggressive_dash_splits, lowercase=tok_cfg.lowercase
    )


def _write(cfg: PreprocessSettings, plan: list[_Split], langs: tuple[str, str]) -> None:
    tok_cfg, clean_cfg = cfg.tok, cfg.clean
    stats: dict[str, dict] = {}
    schemes: dict[str, dict] = {}
    with AtomicGroup() as group:
        for sp in plan:
            is_mono = len(sp.files) == 1
            out_langs = (sp.files[0].suffix[1:],) if is_mono else langs
            cleaned = is_mono or sp.name in cfg.clean_splits
            # mono is never segmented-and-cleaned by apply-bpe: it keeps the token-level cleaning
            split_clean = (
                clean_cfg if is_mono or cfg.clean_after == "tokenize" else guard_config(cfg.clean.hard_limit)
            )
            split_cfg = _tok_config(sp.name, tok_cfg, cfg.normalize_test)
            if not is_mono:  # scoring tokenizes hypotheses with it (evaluate/reference_scheme.py)
                schemes[sp.name] = asdict(split_cfg)
            tmp_paths = [group.tmp_for(cfg.out_dir / f"{sp.name}.{lang}") for lang in out_langs]
            # Evaluation splits also keep the original text of the surviving pairs: the references
            # that scoring needs once cleaning has dropped lines (or carved valid out of train).
            ref_paths = (
                [group.tmp_for(cfg.out_dir / f"{sp.name}.ref.{lang}") for lang in out_langs]
                if not is_mono and sp.name in EVAL_SPLITS
                else []
            )
            dropped_name = f"{sp.files[0].name if is_mono else sp.name}.dropped.tsv"
            dropped_path = group.tmp_for(cfg.out_dir / dropped_name) if cleaned else None
            outs = [open(t, "w", encoding="utf-8", newline="\n") for t in tmp_paths]  # noqa: SIM115
            refs = [open(t, "w", encoding="utf-8", newline="\n") for t in ref_paths]  # noqa: SIM115
            drops = open(dropped_path, "w", encoding="utf-8", newline="\n") if dropped_path else None  # noqa: SIM115
            if drops is not None:
                drops.write("\t".join(("line", "reason", *(("text",) if is_mono else ("source", "target")))))
                drops.write("\n")
            dedup = cfg.dedup and cleaned
            # The raw text again, beside the workers' results: references, and duplicates' lines.
            originals = sp.numbered_rows() if refs or dedup else None
            reasons: Counter[str] = Counter()
            seen: set[bytes] = set()
            n_in = n_out = 0
            t0 = time.perf_counter()
            try:
                total = sp.total  # type: ignore[attr-defined]
                bar = tqdm(total=total, desc=f"preprocess {sp.name}", unit="line", disable=None)
                results = map_chunks(
                    clean_numbered_chunk,
                    sp.numbered_rows(),
                    workers=cfg.workers,
                    chunk_size=cfg.chunk_size,
                    initializer=moses.init_worker,
                    initargs=(out_langs, split_cfg, split_clean if cleaned else None),
                )
                for rows, chunk_stats, chunk_dropped in results:
                    reasons.update(chunk_stats)
                    n_in += len(rows)
                    bar.update(len(rows))
                    cleaned_away = iter(chunk_dropped)  # in row order
                    for row in rows:
                        lineno, original = next(originals) if originals is not None else (0, None)
                        if row is None:
                            _write_dropped(drops, next(cleaned_away))
                            continue
                        if dedup:
                            key = _pair_key(row)
                            if key in seen:
                                reasons["duplicate"] += 1
                                assert original is not None
                                _write_dropped(drops, (lineno, "duplicate", tuple(map(excerpt, original))))
                                continue
                            seen.add(key)
                        for f, col in zip(outs, row, strict=True):
                            f.write(col)
                            f.write("\n")
                        if refs:
                            assert original is not None
                            for f, col in zip(refs, original, strict=True):
                                f.write(col)
                                f.write("\n")
                        n_out += 1
                bar.close()
            finally:
                for f in outs + refs + ([drops] if drops is not None else []):
                    f.close()
            if n_out == 0:
                detail = ", ".join(f"{k}={v}" for k, v in sorted(reasons.items())) or "no input lines"
                raise InputError(
                    f"{sp.files[0]}: split '{sp.name}' is empty after cleaning "
                    f"(all {n_in} lines removed: {detail}); check --ratio/--min-len/--max-len"
                )
            dt = time.perf_counter() - t0
            stats[sp.name] = {"input": n_in, "kept": n_out, "removed": dict(sorted(reasons.items()))}
            if cleaned:
                stats[sp.name]["dropped_file"] = dropped_name  # beside meta.json
            if sp.crlf:  # type: ignore[attr-defined]
                # CRLF line ends are normalized to LF (the CR is never content); counted per split.
                stats[sp.name]["crlf_normalized"] = sp.crlf  # type: ignore[attr-defined]
            if sp.bom:  # type: ignore[attr-defined]
                stats[sp.name]["bom_removed"] = sp.bom  # type: ignore[attr-defined]
            log.info(
                "%s: kept %d of %d lines (%s) in %.1fs",
                sp.name,
                n_out,
                n_in,
                ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none removed",
                dt,
            )
            warning = cleaning_warning(sp.name, n_in, n_out, reasons)
            if warning:
                stats[sp.name]["warning"] = warning
                log.warning("%s", warning)
        meta = {
            "stage": "preprocess",
            "src_lang": cfg.src,
            "tgt_lang": cfg.tgt,
            "moses_tokenized": tok_cfg.tokenize,
            "aggressive_dash_splits": tok_cfg.aggressive_dash_splits and tok_cfg.tokenize,
            "normalized": tok_cfg.normalize,
            "lowercased": tok_cfg.lowercase,
            "test_normalized": _tok_config("test", tok_cfg, cfg.normalize_test).normalize,
            "clean": {
                "splits": list(cfg.clean_splits),
                # bpe: ratio/min_len/max_len are apply-bpe's (its meta.json), only mono's here
                "after": cfg.clean_after,
                "ratio": clean_cfg.ratio,
                "min_len": clean_cfg.min_len,
                "max_len": clean_cfg.max_len,
                "hard_limit": clean_cfg.hard_limit,
                "dedup": bool(cfg.dedup),
                "valid_every": cfg.valid_every,
            },
            "splits": stats,
            "tokenization": schemes,
        }
        meta_tmp = group.tmp_for(cfg.out_dir / "meta.json")
        meta_tmp.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
