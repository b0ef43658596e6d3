"""``export``: a trained checkpoint as a fairseq checkpoint or a CTranslate2 model directory.

Usage::

    python -m pipeline_lib export --checkpoint run/checkpoint_avg.pt --format fairseq --out exp/fairseq
    fairseq-interactive exp/fairseq --path exp/fairseq/checkpoint.pt --source-lang en --target-lang de \\
        --bpe subword_nmt --bpe-codes exp/fairseq/bpe.codes --beam 4 --lenpen 0.6

    python -m pipeline_lib export --checkpoint run/checkpoint_avg.pt --format ctranslate2 --out exp/ct2 \
        --decoding enfr_60L12L_admin --configfile config.wmt14_en_fr.yaml   # that experiment's decoding entry
    python exp/ct2/translate.py < raw.en > hyp.de     # raw text in, detokenized text out
    # or: ctranslate2.Translator("exp/ct2").translate_batch([bpe_line.split()], beam_size=4)

Both formats carry ``text.json``: the Moses settings the data's test source got, the subword model
(copied beside it) and the decoding settings, so raw text can be prepared as the workflow did
(``translate --raw-input`` reads the same record from the data directory).

Admin and DeepNorm models are folded into post-LN first; DLCL, ReZero, T-Fixup, B2T, Sub-LN and
ResiDual are refused (pipeline_lib.export.plain says why for each).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline_lib.atomic import write_text
from pipeline_lib.decode.decoding_entry import add_decoding_arguments, apply_decoding
from pipeline_lib.decode.search_config import SearchConfig
from pipeline_lib.errors import ConfigError

log = logging.getLogger(__name__)
FORMATS = ("fairseq", "ctranslate2")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="checkpoint file (e.g. the averaged one)")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("--out", required=True, type=Path, help="output directory (new or empty, unless --force)")
    p.add_argument("--data-dir", default=None, help="binarized directory (default: the checkpoint's)")
    p.add_argument(
        "--quantization",
        default="float32",
        help="ctranslate2: weight type stored (float32, int8, int16, float16, ...); the compute type "
        "can still be chosen when loading",
    )
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    p.add_argument(
        "--text-meta",
        default=None,
        help="the test split's preprocess meta.json (default: tok-test/meta.json beside the data "
        "directory); without one, text.json and translate.py are left out",
    )
    d = p.add_argument_group("decoding recorded in text.json (or --decoding: the workflow's entry)")
    defaults = SearchConfig()
    d.add_argument("--beam", type=int, default=defaults.beam)
    d.add_argument("--lenpen", type=float, default=defaults.lenpen)
    d.add_argument("--max-len-a", type=float, default=defaults.max_len_a)
    d.add_argument("--max-len-b", type=int, default=defaults.max_len_b)
    add_decoding_arguments(p, ("beam", "lenpen", "max_len_a", "max_len_b"))


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    apply_decoding(args)
    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not args.force:
        raise ConfigError(f"--out {out} exists and is not an empty directory (pass --force to replace it)")
    from pipeline_lib.export.ctranslate2 import QUANTIZATIONS
    from pipeline_lib.export.plain import load_export_source, summary

    if args.format == "ctranslate2" and args.quantization not in QUANTIZATIONS:
        raise ConfigError(f"--quantization {args.quantization!r} is not one of {', '.join(QUANTIZATIONS)}")
    source = load_export_source(args.checkpoint, args.data_dir)
    if args.format == "fairseq":
        from pipeline_lib.export.fairseq import write_fairseq

        if out.exists() and args.force:
            _clear(out)
        written = write_fairseq(source, out)
    else:
        from pipeline_lib.export.ctranslate2 import write_ctranslate2
        from pipeline_lib.export.fairseq import copy_subword_model

        written = write_ctranslate2(source, out, args.quantization)
        written += copy_subword_model(source, out)
    written += _raw_text_files(args, source, out)
    info = {"format": args.format, "checkpoint": str(args.checkpoint), **summary(source)}
    write_text(out / "export.json", json.dumps(info, indent=2) + "\n")
    folded = " (folded into post-LN)" if source.residual not in ("post_ln", "pre_ln") else ""
    log.info("exported %s%s to %s: %s", source.residual, folded, out, ", ".join(p.name for p in written))
    return 0


def _raw_text_files(args: argparse.Namespace, source, out: Path) -> list[Path]:
    """text.json (and, for CTranslate2, translate.py) when the data's text recipe is found."""
    from pipeline_lib.data.raw_text import text_recipe
    from pipeline_lib.export.text_recipe import write_text_recipe, write_translate_script

    if source.bin_dir is None:
        return []
    try:
        recipe = text_recipe(source.bin_dir, Path(args.text_meta) if args.text_meta else None)
    except ConfigError as exc:
        if args.text_meta:
            raise
        log.warning("no raw-text files in the export: %s", exc)
        return []
    search = SearchConfig(
        beam=args.beam, lenpen=args.lenpen, max_len_a=args.max_len_a, max_len_b=args.max_len_b
    )
    subword_file = None
    if source.subword_model is not None:
        subword_file = "bpe.codes" if source.subword == "bpe" else source.subword_model.name
    written = [write_text_recipe(recipe, subword_file, search, source.model.config.max_positions, out)]
    if args.format == "ctranslate2":
        written.append(write_translate_script(out))
    return written


def _clear(out: Path) -> None:
    import shutil

    shutil.rmtree(out)
    out.mkdir(parents=True)
