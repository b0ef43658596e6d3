"""``bt-mix``: real bitext + back-translated pairs -> one subword-segmented training directory.

Usage::

    python -m pipeline_lib.backtranslation --real-dir work/data/demo/bpe --src en --tgt fr \\
        --synthetic-src work/backtranslation/bt/shard0-of-2.bpe work/backtranslation/bt/shard1-of-2.bpe \\
        --mono-tgt work/data/demo/bpe/mono.fr \\
        --out-dir work/data/bt-bt/bpe [--upsample-real 2] [--no-tag]

The synthetic source (the reverse model's subword output for ``--mono-tgt``, one file or its shards
in order) is paired line by line with the monolingual target text; everything is streamed, so memory
does not grow with the corpus. ``train.{src,tgt}`` of ``--out-dir`` are the real pairs repeated
``--upsample-real`` times followed by the synthetic pairs, whose sources start with the ``<BT>`` tag
unless ``--no-tag`` (tagged back-translation, Caswell et al. 2019; Edunov et al. 2018 do not tag, and
neither does the workflow unless ``tagged: true``). Pairs whose synthetic source is
empty (a diverged or empty translation) are dropped. ``valid``/``test`` are copied from the real
directory, as are its subword model and ``meta.json`` (extended with a ``backtranslation`` record),
so ``binarize`` and decoding treat the mix like any other segmented corpus. Written atomically.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import shutil
from pathlib import Path

from pipeline_lib.atomic import AtomicGroup
from pipeline_lib.backtranslation.mix_settings import MixSettings
from pipeline_lib.data.textio import count_lines, read_lines
from pipeline_lib.dataclass_cli import add_dataclass_arguments
from pipeline_lib.errors import ConfigError, InputError

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(p, MixSettings)


def _mismatch(synthetic: list[Path], counts: list[int], mono: Path, n_mono: int) -> str:
    """``file:line`` of the first line that exists on one side only, and both totals."""
    n_syn = sum(counts)
    if n_syn < n_mono:
        where = f"{mono}:{n_syn + 1}"
    else:  # the synthetic file holding line n_mono + 1, and that line's number in it
        before = 0
        for path, n in zip(synthetic, counts, strict=True):
            if before + n > n_mono:
                where = f"{path}:{n_mono - before + 1}"
                break
            before += n
    return f"{where}: line-count mismatch, the synthetic sources have {n_syn} lines, {mono} has {n_mono}"


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.upsample_real < 1:
        raise ConfigError(f"--upsample-real must be >= 1, got {args.upsample_real}")
    if args.tagged and (not args.tag or any(c.isspace() for c in args.tag)):
        raise ConfigError(f"--tag must be one non-empty token, got {args.tag!r}")
    real = args.real_dir
    langs = (args.src, args.tgt)
    # The test split is binarized apart (binarize_test), from the real dataset's bpe-test/.
    needed = [real / f"{s}.{lang}" for s in ("train", "valid") for lang in langs]
    needed += [*args.synthetic_src, args.mono_tgt, real / "meta.json"]
    for path in needed:
        if not path.is_file():
            raise InputError(f"{path}: not found")
    counts = [count_lines(p) for p in args.synthetic_src]
    n_syn, n_mono = sum(counts), count_lines(args.mono_tgt)
    if n_syn != n_mono:
        raise InputError(_mismatch(args.synthetic_src, counts, args.mono_tgt, n_mono))
    meta = json.loads((real / "meta.json").read_text(encoding="utf-8"))
    n_real = count_lines(real / f"train.{args.src}")
    kept = dropped = 0
    with AtomicGroup() as group:
        out_src = group.tmp_for(args.out_dir / f"train.{args.src}").open("w", encoding="utf-8", newline="\n")
        out_tgt = group.tmp_for(args.out_dir / f"train.{args.tgt}").open("w", encoding="utf-8", newline="\n")
        try:
            for _ in range(args.upsample_real):
                for lang, out in ((args.src, out_src), (args.tgt, out_tgt)):
                    for line in read_lines(real / f"train.{lang}"):
                        out.write(line + "\n")
            prefix = args.tag + " " if args.tagged else ""
            synthetic = itertools.chain.from_iterable(read_lines(p) for p in args.synthetic_src)
            for syn, mono in zip(synthetic, read_lines(args.mono_tgt), strict=True):
                if not syn.strip() or not mono.strip():
                    dropped += 1
                    continue
                out_src.write(prefix + syn.strip() + "\n")
                out_tgt.write(mono.strip() + "\n")
                kept += 1
        finally:
            out_src.close()
            out_tgt.close()
        for split in ("valid",):
            for lang in langs:
                shutil.copyfile(real / f"{split}.{lang}", group.tmp_for(args.out_dir / f"{split}.{lang}"))
        model = meta.get("model")
        if model and (real / model).is_file():
            shutil.copyfile(real / model, group.tmp_for(args.out_dir / model))
        meta["backtranslation"] = {
            "real_dir": str(real),
            "real_pairs": n_real,
            "upsample_real": args.upsample_real,
            "synthetic_pairs": kept,
            "synthetic_dropped_empty": dropped,
            "tag": args.tag if args.tagged else None,
            "synthetic_src": [str(p) for p in args.synthetic_src],
            "mono_tgt": str(args.mono_tgt),
        }
        group.tmp_for(args.out_dir / "meta.json").write_text(
            json.dumps(meta, indent=2) + "\n", encoding="utf-8"
        )
    log.info(
        "mix: %d real pairs x%d + %d synthetic (%d empty dropped) -> %s",
        n_real, args.upsample_real, kept, dropped, args.out_dir,
    )  # fmt: skip
    if kept == 0:
        log.warning("no synthetic pairs: the forward model trains on real data only")
    return 0
