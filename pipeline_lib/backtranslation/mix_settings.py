"""The ``bt-mix`` stage's settings; the workflow schema reads the fields marked ``backtranslation``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.dataclass_cli import option
from pipeline_lib.lang_code import lang_code

BT_TAG = "<BT>"


@dataclass(frozen=True)
class MixSettings:
    """The flags of ``bt-mix``; the fields marked ``backtranslation`` are keys of a workflow config's
    ``backtranslation:`` entry, with the defaults the config gives them (untagged, as Edunov et al.)."""

    real_dir: Path = option(help="apply-bpe output (train/valid/test, meta.json)", type=Path)
    synthetic_src: tuple[Path, ...] = option(
        help="back-translated sources, subword text: one file, or the shards in input order",
        type=Path,
        nargs="+",
    )
    mono_tgt: Path = option(help="the monolingual targets they translate", type=Path)
    out_dir: Path = option(type=Path)
    src: str = option(type=lang_code)
    tgt: str = option(type=lang_code)
    upsample_real: int = option(
        1,
        "repeat the real bitext N times",
        backtranslation=True,
        ge=1,
        doc="times the real bitext is repeated in the mix",
    )
    tagged: bool = option(
        True,
        "do not prefix synthetic sources with <BT>",
        flag="--no-tag",
        backtranslation=True,
        config_default=False,
        doc="prefix synthetic sources with the <BT> tag (Caswell et al. 2019); Edunov et al. 2018, "
        "whom the Very Deep paper follows, do not tag",
    )
    tag: str = option(BT_TAG, "the tag token (default <BT>)")
