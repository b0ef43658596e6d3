"""learn-bpe on a sample against learn-bpe on the whole corpus: time, peak memory, and how much the codes differ.

    .venv/bin/python bench/bpe_sample.py [--pairs 4M] [--samples 500k,1M,2M] [--merges 40000] [--json out.json]

A synthetic corpus (``bench/synthetic_corpus.py``, as ``bench/scale_data.py`` uses) is learnt on whole
(the baseline: what subword-nmt and fairseq's WMT recipes do) and on seeded samples (``--sample-lines``).
Each run is its own CLI process, measured as scale_data.py measures a stage (wall time, peak PSS of the
process tree). For each sample it prints, against the baseline:

- time and memory ratios;
- merges shared: the share of the baseline's first 1k / 10k / all merges that the sample's codes also
  learnt (as a set: BPE merges are order-dependent, but a merge both learnt is applied in both);
- segmentation: subword tokens per line on 20k held-out lines (a fresh corpus of another seed), and
  the share of held-out lines segmented identically.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_data import parse_size, run_stage  # noqa: E402
from synthetic_corpus import write_corpus  # noqa: E402

HELD_OUT = 20_000


def learn(argv: list, log: Path) -> dict:
    return run_stage([str(a) for a in argv], log)


def merges(codes: Path) -> list[str]:
    return [
        line for line in codes.read_text(encoding="utf-8").splitlines() if not line.startswith("#version")
    ]


def segment(codes: Path, lines: list[str]) -> list[str]:
    from subword_nmt import apply_bpe

    with codecs.open(str(codes), encoding="utf-8") as f:
        bpe = apply_bpe.BPE(f)
    return [bpe.process_line(line) for line in lines]


def compare(base: Path, other: Path, held_out: list[str], base_seg: list[str]) -> dict:
    a, b = merges(base), merges(other)
    shared = {k: len(set(a[:k]) & set(b)) / len(a[:k]) for k in (1_000, 10_000, len(a))}
    seg = segment(other, held_out)
    return {
        "merges_shared": {str(k): v for k, v in shared.items()},
        "tokens_per_line": sum(len(s.split()) for s in seg) / len(seg),
        "baseline_tokens_per_line": sum(len(s.split()) for s in base_seg) / len(base_seg),
        "same_segmentation": sum(x == y for x, y in zip(seg, base_seg, strict=True)) / len(seg),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=parse_size, default=parse_size("4M"))
    p.add_argument("--samples", default="500k,1M,2M")
    p.add_argument("--merges", type=int, default=40000)
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_corpus(root / "raw", args.pairs)
        write_corpus(root / "held", HELD_OUT, seed=7)
        held_out = (root / "held" / "train.en").read_text(encoding="utf-8").splitlines()
        common = ["--in-dir", root / "raw", "--src", "en", "--tgt", "fr", "--merges", args.merges,
                  "--workers", args.workers]  # fmt: skip
        runs = {"whole": learn(["learn-bpe", *common, "--model-dir", root / "whole"], root / "whole.log")}
        base_codes = root / "whole" / "codes"
        base_seg = segment(base_codes, held_out)
        for size in args.samples.split(","):
            n = parse_size(size)
            model = root / f"s{n}"
            runs[size] = learn(
                ["learn-bpe", *common, "--model-dir", model, "--sample-lines", n], root / f"s{n}.log"
            )
            runs[size]["kept"] = json.loads((model / "subword.json").read_text())["sample_lines"]
            runs[size] |= compare(base_codes, model / "codes", held_out, base_seg)
    base = runs["whole"]
    print(
        f"learn-bpe, {args.merges} merges, synthetic corpus of {args.pairs:,} pairs, {args.workers} workers"
    )
    print("| learnt on | wall s | ×whole | peak MB | ×whole | first 1k / 10k / all merges shared | "
          "tokens/line held-out | same segmentation |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    print(f"| whole corpus | {base['wall_s']:.0f} | 1 | {base['peak_pss_mb']:.0f} | 1 | – | – | – |")
    for size, r in runs.items():
        if size == "whole":
            continue
        shared = " / ".join(f"{v:.1%}" for v in r["merges_shared"].values())
        print(
            f"| sample {r['kept']:,} | {r['wall_s']:.0f} | {r['wall_s'] / base['wall_s']:.2f} | "
            f"{r['peak_pss_mb']:.0f} | {r['peak_pss_mb'] / base['peak_pss_mb']:.2f} | {shared} | "
            f"{r['tokens_per_line']:.2f} vs {r['baseline_tokens_per_line']:.2f} | {r['same_segmentation']:.1%} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs},
                                        indent=2) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
