"""How a dataset's tokenized reference was made, read back from what preprocess recorded, so that a
hypothesis is tokenized for tokenized BLEU exactly as its reference was (IWSLT'14: no ``-a``,
lowercased; WMT'14: the fairseq test branch). Nothing here chooses a scheme: the data stage did.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from pipeline_lib.data.moses import FAIRSEQ_TEST, TokConfig
from pipeline_lib.errors import ConfigError, InputError


def split_of(ref_tok: str | Path) -> str:
    """``test`` of ``.../test.fr``: the split a tokenized reference file holds."""
    return Path(ref_tok).name.split(".", 1)[0]


def recorded_scheme(meta_path: str | Path, split: str) -> TokConfig:
    """The TokConfig preprocess used for ``split`` (its ``tokenization`` record in ``meta.json``)."""
    path = Path(meta_path)
    if not path.is_file():
        raise InputError(f"{path}: not found (preprocess writes it beside the tokenized reference)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    record = meta.get("tokenization", {}).get(split)
    if record is None:
        raise InputError(
            f"{path}: no tokenization record for split {split!r} (written by an older preprocess: rerun it)"
        )
    known = {f.name for f in fields(TokConfig)}
    unknown = set(record) - known
    if unknown:
        raise InputError(f"{path}: tokenization.{split} has unknown keys {sorted(unknown)}")
    return TokConfig(**record)


def hypothesis_scheme(ref_tok: str | None, ref_tok_meta: str | None) -> TokConfig:
    """The scheme to tokenize hypotheses with: the reference's when it is a file, else (both sides
    tokenized here from detokenized text) fairseq's test branch, the same for both."""
    if ref_tok is None:
        return FAIRSEQ_TEST
    if ref_tok_meta is None:
        raise ConfigError(
            f"--ref-tok {ref_tok} needs --ref-tok-meta (preprocess's meta.json, which records how the "
            "reference was tokenized) to tokenize the hypotheses the same way; or give --hyp-tok"
        )
    return recorded_scheme(ref_tok_meta, split_of(ref_tok))
