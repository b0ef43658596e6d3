"""Moses preprocessing of one line and ``clean-corpus-n`` filtering of one pair.

Per line, as fairseq's WMT'14 prepare scripts do with the Moses perl scripts:
``normalize-punctuation.perl -l L`` -> ``remove-non-printing-char.perl`` ->
``tokenizer.perl -a -l L`` (aggressive hyphen splitting, ``@-@``; XML escaping on).
We call sacremoses for all three (its ``remove_control_chars`` deletes ``\\p{C}`` where the perl
script writes a space; tokenization then collapses the space anyway in nearly every case).

Test sets follow the same scripts' test branch instead: ``sed "s/’/'/g"`` then ``tokenizer.perl -a``,
with no punctuation normalization and no non-printing removal (:data:`FAIRSEQ_TEST`), so « » and
typographic quotes in a reference survive into the tokenized reference that tokenized BLEU reads.

Cleaning follows ``clean-corpus-n.perl``: a pair is dropped when either side has fewer than
``min_len`` or more than ``max_len`` tokens, or when one side is more than ``ratio`` times
longer than the other. Lines with more than ``hard_limit`` whitespace tokens *before*
tokenization are dropped without being tokenized (a 10k-token line would take sacremoses
seconds and would be cleaned away anyway) and counted under ``over_hard_limit``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sacremoses import MosesPunctNormalizer, MosesTokenizer

from pipeline_lib.errors import ConfigError


@dataclass(frozen=True)
class CleanConfig:
    ratio: float = 1.5
    min_len: int = 1
    max_len: int = 250
    hard_limit: int = 10_000

    def __post_init__(self) -> None:
        if self.ratio <= 0:
            raise ConfigError(f"--ratio must be > 0, got {self.ratio}")
        if self.min_len < 0 or self.max_len < max(self.min_len, 1):
            raise ConfigError(f"--min-len/--max-len: need 0 <= min ({self.min_len}) <= max ({self.max_len})")
        if self.hard_limit < 1:
            raise ConfigError(f"--hard-limit must be >= 1, got {self.hard_limit}")


@dataclass(frozen=True)
class TokConfig:
    normalize: bool = True
    remove_non_printing: bool = True
    tokenize: bool = True
    aggressive_dash_splits: bool = True
    escape: bool = True
    straighten_apostrophes: bool = False  # the test branch's sed "s/’/'/g"
    lowercase: bool = False  # lowercase.perl after tokenizing (fairseq's IWSLT'14 recipe)


# fairseq prepare-wmt14en2{fr,de}.sh, test branch: sed "s/’/'/g" | tokenizer.perl -a -l L
FAIRSEQ_TEST = TokConfig(normalize=False, remove_non_printing=False, straighten_apostrophes=True)


class LinePreprocessor:
    """Moses normalize + non-printing removal + tokenize for one language."""

    def __init__(self, lang: str, cfg: TokConfig) -> None:
        self.cfg = cfg
        self.norm = MosesPunctNormalizer(lang=lang, post_remove_control_chars=cfg.remove_non_printing)
        self.tok = MosesTokenizer(lang=lang)

    def __call__(self, line: str) -> str:
        if self.cfg.straighten_apostrophes:
            line = line.replace("\u2019", "'")
        if self.cfg.normalize or self.cfg.remove_non_printing:
            line = self.norm.normalize(line) if self.cfg.normalize else self.norm.remove_control_chars(line)
        if self.cfg.tokenize:
            line = self.tok.tokenize(
                line,
                aggressive_dash_splits=self.cfg.aggressive_dash_splits,
                escape=self.cfg.escape,
                return_str=True,
            )
        else:
            line = " ".join(line.split())
        return line.lower() if self.cfg.lowercase else line


def tokenize_lines(lines: list[str], lang: str, cfg: TokConfig = FAIRSEQ_TEST) -> list[str]:
    """Tokenize text (a reference, or a detokenized hypothesis) with ``cfg`` (default: as the fairseq
    scripts tokenize test)."""
    pre = LinePreprocessor(lang, cfg)
    return [pre(line) for line in lines]


def tokenize_like_test_set(lines: list[str], lang: str) -> list[str]:
    return tokenize_lines(lines, lang, FAIRSEQ_TEST)


def clean_reason(n_src: int, n_tgt: int, cfg: CleanConfig) -> str | None:
    """Why ``clean-corpus-n`` would drop a pair of these token counts (None: keep)."""
    if n_src == 0 or n_tgt == 0:
        return "empty"
    if n_src < cfg.min_len or n_tgt < cfg.min_len:
        return "too_short"
    if n_src > cfg.max_len or n_tgt > cfg.max_len:
        return "too_long"
    if n_src / n_tgt > cfg.ratio or n_tgt / n_src > cfg.ratio:
        return "ratio"
    return None


def mono_clean_reason(n: int, cfg: CleanConfig) -> str | None:
    if n == 0:
        return "empty"
    if n < cfg.min_len:
        return "too_short"
    if n > cfg.max_len:
        return "too_long"
    return None


# -- worker side (module globals: one tokenizer per process, built in the initializer) --------
_WORKER: dict[str, object] = {}


def init_worker(langs: tuple[str, ...], tok_cfg: TokConfig, clean_cfg: CleanConfig | None) -> None:
    _WORKER["pre"] = tuple(LinePreprocessor(lang, tok_cfg) for lang in langs)
    _WORKER["clean"] = clean_cfg


def process_chunk(rows: list[tuple[str, ...]]) -> tuple[list[tuple[str, ...] | None], Counter[str]]:
    """Preprocess a chunk of rows (1 column: monolingual, 2: parallel).

    Returns one entry per input row (``None`` where the row was cleaned away, so the caller can
    still report line numbers) and the counter of drop reasons.
    """
    pre: tuple[LinePreprocessor, ...] = _WORKER["pre"]  # type: ignore[assignment]
    clean: CleanConfig | None = _WORKER["clean"]  # type: ignore[assignment]
    out: list[tuple[str, ...] | None] = []
    stats: Counter[str] = Counter()
    for row in rows:
        if clean is not None and any(len(col.split()) > clean.hard_limit for col in row):
            out.append(None)
            stats["over_hard_limit"] += 1
            continue
        toks = tuple(p(col) for p, col in zip(pre, row, strict=True))
        if clean is not None:
            lens = [len(t.split()) for t in toks]
            reason = (
                clean_reason(lens[0], lens[1], clean) if len(lens) == 2 else mono_clean_reason(lens[0], clean)
            )
            if reason is not None:
                out.append(None)
                stats[reason] += 1
                continue
        out.append(toks)
    return out, stats
