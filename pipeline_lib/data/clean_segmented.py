"""``clean-corpus-n.perl`` on subword-segmented pairs: apply-bpe's cleaning after BPE.

fairseq's ``prepare-wmt14en2fr.sh`` (lines 121-132) segments train, valid and test, then runs
``clean-corpus-n.perl -ratio 1.5 bpe.train ... 1 250`` and the same on valid: lengths and ratios are
counted in subwords, not in Moses tokens, and test is never cleaned. Per pair, as the perl script
(``scripts/training/clean-corpus-n.perl``, lines 109-131): whitespace runs count as one separator,
an empty side, a side under ``min_len`` or over ``max_len`` pieces, a ratio over ``ratio`` in
either direction, or a piece of more than 1,000 characters drops the pair. The script also deletes
``|`` before counting (factor separators); Moses-tokenized text has none (the tokenizer writes
``&#124;``), so counting is left as is.

Files line-aligned with the input (the tokenized split, the original-text references) keep the
same lines, so that evaluation on a cleaned valid split still reads aligned text.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.data.moses import CleanConfig, clean_reason
from pipeline_lib.data.preprocess import EVAL_SPLITS, cleaning_warning, excerpt
from pipeline_lib.data.textio import read_lines
from pipeline_lib.errors import InputError

log = logging.getLogger(__name__)

MAX_WORD_LENGTH = 1000  # clean-corpus-n's default -max-word-length (characters)
DROPPED_HEADER = "line\treason\tsource\ttarget\n"


def pair_reason(src: str, tgt: str, cfg: CleanConfig) -> str | None:
    """Why clean-corpus-n drops this segmented pair (None: keep); the reasons are preprocess's."""
    src_toks, tgt_toks = src.split(), tgt.split()
    reason = clean_reason(len(src_toks), len(tgt_toks), cfg)
    if reason is None and any(len(t) > MAX_WORD_LENGTH for t in (*src_toks, *tgt_toks)):
        return "long_word"
    return reason


def _aligned(paths: Sequence[Path]) -> Iterator[tuple[str, ...]]:
    """The files' lines side by side; a file that ends early or late is an error naming it."""
    iters = [read_lines(p) for p in paths]
    lineno = 0
    while True:
        lineno += 1
        row = tuple(next(it, None) for it in iters)
        if all(col is None for col in row):
            return
        if any(col is None for col in row):
            short = paths[row.index(None)]
            longer = paths[next(i for i, col in enumerate(row) if col is not None)]
            raise InputError(
                f"{short}:{lineno}: line-count mismatch, {short} ends after {lineno - 1} lines "
                f"but {longer} continues"
            )
        yield row  # type: ignore[misc]


def clean_split(
    split: str,
    segmented: tuple[Path, Path],
    outputs: tuple[Path, Path],
    dropped: Path,
    cfg: CleanConfig,
    companions: Sequence[tuple[Path, Path]] = (),
) -> dict:
    """Filter the segmented (source, target) pair of files into ``outputs``, listing each dropped pair
    in ``dropped`` (1-based line, reason, segmented source and target), and copy the kept lines of
    every ``(input, output)`` companion. Returns the split's counts in preprocess's meta.json shape
    (``input``, ``kept``, ``removed``; the caller names the ``dropped_file``)."""
    reasons: Counter[str] = Counter()
    n_in = n_out = 0
    with ExitStack() as stack:
        outs = [stack.enter_context(open(p, "w", encoding="utf-8", newline="\n")) for p in outputs]
        outs += [stack.enter_context(open(out, "w", encoding="utf-8", newline="\n")) for _, out in companions]
        drops = stack.enter_context(open(dropped, "w", encoding="utf-8", newline="\n"))
        drops.write(DROPPED_HEADER)
        for row in _aligned([*segmented, *(src for src, _ in companions)]):
            n_in += 1
            reason = pair_reason(row[0], row[1], cfg)
            if reason is not None:
                reasons[reason] += 1
                drops.write("\t".join((str(n_in), reason, excerpt(row[0]), excerpt(row[1]))) + "\n")
                continue
            n_out += 1
            for f, line in zip(outs, row, strict=True):
                f.write(line)
                f.write("\n")
    stats: dict = {"input": n_in, "kept": n_out, "removed": dict(sorted(reasons.items()))}
    warning = cleaning_warning(f"{split} (after BPE)", n_in, n_out, reasons)
    if warning:
        stats["warning"] = warning
    return stats


@dataclass(frozen=True)
class SplitPaths:
    """Where apply-bpe reads (``in_dir``), writes (``out_dir``) and segments before cleaning (``scratch``)."""

    in_dir: Path
    out_dir: Path
    scratch: Path
    langs: tuple[str, str]


def segment_and_clean(
    paths: SplitPaths,
    split: str,
    cfg: CleanConfig,
    group: AtomicGroup,
    segment: Callable[[str, str, Path], object],
) -> dict:
    """Segment both sides of ``split`` into the scratch folder with ``segment(split, lang, dst)``, then
    keep the pairs clean-corpus-n keeps, as outputs of ``group``. An evaluation split also gets its
    tokenized text and references filtered alike (``{split}.tok.{lang}``, ``{split}.ref.{lang}``):
    the lines scoring reads must match the cleaned split. Returns the split's meta.json entry."""
    segmented = (paths.scratch / f"{split}.{paths.langs[0]}", paths.scratch / f"{split}.{paths.langs[1]}")
    for lang, dst in zip(paths.langs, segmented, strict=True):
        segment(split, lang, dst)
    companions = []
    if split in EVAL_SPLITS:
        for kind, name in (("tok", "{split}.{lang}"), ("ref", "{split}.ref.{lang}")):
            for lang in paths.langs:
                src = paths.in_dir / name.format(split=split, lang=lang)
                if src.is_file():
                    companions.append((src, group.tmp_for(paths.out_dir / f"{split}.{kind}.{lang}")))
    outputs = (
        group.tmp_for(paths.out_dir / f"{split}.{paths.langs[0]}"),
        group.tmp_for(paths.out_dir / f"{split}.{paths.langs[1]}"),
    )
    dropped = f"{split}.dropped.tsv"
    stats = clean_split(split, segmented, outputs, group.tmp_for(paths.out_dir / dropped), cfg, companions)
    removed = ", ".join(f"{k} {v}" for k, v in stats["removed"].items()) or "none removed"
    if stats["kept"] == 0:
        raise InputError(
            f"{paths.in_dir / f'{split}.{paths.langs[0]}'}: split '{split}' is empty after cleaning on "
            f"subwords (all {stats['input']} pairs removed: {removed}); check --ratio/--min-len/--max-len"
        )
    if "warning" in stats:
        log.warning("%s", stats["warning"])
    log.info("%s: kept %d of %d pairs after segmenting (%s)", split, stats["kept"], stats["input"], removed)
    return {**stats, "dropped_file": dropped}
