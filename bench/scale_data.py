"""The data path at growing corpus sizes: time, throughput and peak memory per stage, fitted and extrapolated.

    .venv/bin/python bench/scale_data.py [--sizes 250k,1M,4M] [--workers N] [--merges 40000]
                                         [--target-pairs 40.8M --node-cores 16] [--json out.json]
                                         [--stages preprocess]   # a prefix of the stages; growth only
                                         [--bpe-sample-lines 500k]  # learn-bpe on a sample, beside it

For each size a synthetic corpus (``bench/synthetic_corpus.py``: WMT-like lengths, Heaps-law
vocabulary growth) goes through the stages exactly as the workflow runs them, each in its own
process through the CLI: ``preprocess`` (train only), ``learn-bpe``, ``apply-bpe``, ``binarize``.
Per stage it prints wall time, lines/s and lines/s per worker, and the peak memory of the stage's
whole process tree (the sum of PSS over the stage and its workers, sampled every 0.1 s; PSS splits
pages shared by forked workers between them, so the sum is what the tree really holds). "anon" is
the anonymous part (the heap), without the page cache of memory-mapped output.

Then, per stage, time and memory are fitted as a power of corpus size (least squares in log-log),
the memory ratio between the two largest sizes is printed (flat = streaming), and the time is
extrapolated to --target-pairs on a --node-cores node. Each part's CPU seconds are split into the
serial part (the stage's main process: reading, dispatching chunks, writing; learn-bpe's merge loop
and vocabularies) and the parallel part (the workers), read from /proc; there, the part takes
max(serial, parallel / cores), i.e. perfect pipelining and linear scaling of the workers, which is the
optimistic end (``bench/preprocess_throughput.py`` measures the scaling from 1 to N workers here).
The synthetic corpus' vocabulary grows more slowly than a real one's, so learn-bpe's merge loop,
whose cost follows the number of word types, is extrapolated from types too. ``--bpe-sample-lines N``
also runs ``learn-bpe --sample-lines N`` on the same text (the later stages use the whole-corpus codes);
its merges and vocabularies are a fixed amount of work at any corpus size, its sampling pass is serial
and linear, and a second total gives the data path with it in place of the whole-corpus learn-bpe.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_corpus import write_corpus  # noqa: E402

MB = 1024 * 1024

# The parts of each stage, and whether they run in parallel over --workers. learn-bpe logs the
# duration of its phases ("phase <name> <seconds>s"), so its serial merge loop is timed apart.
PARALLEL = {"preprocess": True, "learn-bpe:count": True, "learn-bpe:merge": False,
            "learn-bpe:vocab": False, "apply-bpe": True, "binarize": True,
            # on a sample: drawing it is one serial pass over the corpus; the sample's word counts are
            # a fixed amount of work whatever the corpus size, and so are its merges and vocabularies
            "learn-bpe-sample:count": False, "learn-bpe-sample:merge": False,
            "learn-bpe-sample:vocab": False}  # fmt: skip
SAMPLE_STAGE = "learn-bpe-sample"  # an alternative to learn-bpe: measured, not fed to the later stages


def parse_size(text: str) -> int:
    m = re.fullmatch(r"([\d.]+)\s*([kKmM]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 250k, 1M, 40.8M)")
    return int(float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()])


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _pss_kb(pid: int) -> tuple[int, int]:
    pss = anon = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Pss_Anon:"):
                    anon = int(line.split()[1])
    except OSError:
        pass
    return pss, anon


class TreeMemory(threading.Thread):
    """Peak of the summed PSS (and anonymous PSS) over a process and all its descendants, and the CPU
    seconds of the process itself (the serial part: reading, dispatching, writing) and of the workers."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_pss = self.peak_anon = 0
        self.root_cpu = self.worker_cpu = 0.0
        self._worker_cpu: dict[int, float] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            pids, todo = [], [self.pid]
            while todo:
                p = todo.pop()
                pids.append(p)
                todo.extend(_children(p))
            root_cpu = _cpu_s(self.pid)
            if root_cpu:  # 0 once the process has exited: keep the last reading
                self.root_cpu = root_cpu
            for p in pids[1:]:
                self._worker_cpu[p] = max(self._worker_cpu.get(p, 0.0), _cpu_s(p))
            self.worker_cpu = sum(self._worker_cpu.values())
            totals = [_pss_kb(p) for p in pids]
            self.peak_pss = max(self.peak_pss, sum(t[0] for t in totals))
            self.peak_anon = max(self.peak_anon, sum(t[1] for t in totals))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def run_stage(argv: list[str], log_path: Path) -> dict:
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline_lib", *argv], stdout=log, stderr=log)
        mem = TreeMemory(proc.pid)
        mem.start()
        rc = proc.wait()
        mem.stop()
    wall = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"{argv[0]} failed (exit {rc}); see {log_path}:\n{log_path.read_text()[-2000:]}")
    phases = {m[0]: float(m[1]) for m in re.findall(r"phase (\w+) ([\d.]+)s", log_path.read_text())}
    return {"wall_s": wall, "peak_pss_mb": mem.peak_pss / 1024, "peak_anon_mb": mem.peak_anon / 1024,
            "phases": phases, "main_cpu_s": mem.root_cpu, "worker_cpu_s": mem.worker_cpu}  # fmt: skip


STAGES = ("preprocess", "learn-bpe", "apply-bpe", "binarize")  # the order bench_size runs them in


def bench_size(
    root: Path, pairs: int, workers: int, merges: int, only: list[str] | None = None, bpe_sample: int = 0
) -> dict:
    d = root / f"p{pairs}"
    t0 = time.perf_counter()
    write_corpus(d / "raw", pairs)
    gen_s = time.perf_counter() - t0
    langs = ["--src", "en", "--tgt", "fr"]
    w = ["--workers", str(workers)]
    stages = {
        "preprocess": ["preprocess", "--in-dir", d / "raw", "--out-dir", d / "tok", *langs,
                       "--splits", "train", *w],
        "learn-bpe": ["learn-bpe", "--in-dir", d / "tok", "--model-dir", d / "sw", *langs,
                      "--merges", merges, *w],
        "apply-bpe": ["apply-bpe", "--in-dir", d / "tok", "--model-dir", d / "sw", "--out-dir", d / "bpe",
                      *langs, "--splits", "train", *w],
        "binarize": ["binarize", "--in-dir", d / "bpe", "--out-dir", d / "bin", *langs, "--splits", "train"],
    }  # fmt: skip
    assert tuple(stages) == STAGES
    if bpe_sample:  # right after learn-bpe, on the same text, into its own model directory
        sample_argv = ["learn-bpe", "--in-dir", d / "tok", "--model-dir", d / "sw-sample", *langs,
                       "--merges", merges, "--sample-lines", bpe_sample, *w]  # fmt: skip
        order = list(stages.items())
        order.insert(STAGES.index("learn-bpe") + 1, (SAMPLE_STAGE, sample_argv))
        stages = dict(order)
    out: dict = {"pairs": pairs, "workers": workers, "generate_s": gen_s, "stages": {}}
    for name, argv in stages.items():
        if only is not None and name.removesuffix("-sample") not in only:
            continue
        res = run_stage([str(a) for a in argv], d / f"{name}.log")
        lines = 2 * pairs  # both sides
        res["lines_per_s"] = lines / res["wall_s"]
        res["lines_per_s_per_worker"] = res["lines_per_s"] / (workers if PARALLEL.get(name, False) else 1)
        out["stages"][name] = res
        print(
            f"  {pairs:>10,} pairs  {name:<11} {res['wall_s']:8.1f} s  {res['lines_per_s']:>9,.0f} lines/s  "
            f"peak {res['peak_pss_mb']:7.0f} MB (anon {res['peak_anon_mb']:6.0f})"
            + (f"  phases {res['phases']}" if res["phases"] else ""),
            flush=True,
        )
    meta = json.loads((d / "tok" / "meta.json").read_text())["splits"]["train"]
    out["kept_pairs"] = meta["kept"]
    bpe_log = d / "learn-bpe.log"
    types = re.search(r"on (\d+) word types", bpe_log.read_text()) if bpe_log.exists() else None
    out["word_types"] = int(types.group(1)) if types else -1
    return out


def fit_power(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(exponent, constant) of y = c * x^b, least squares in log-log."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    var = sum((a - mx) ** 2 for a in lx)
    b = sum((a - mx) * (c - my) for a, c in zip(lx, ly, strict=True)) / var if var else 0.0
    return b, math.exp(my - b * mx)


def stage_parts(res: dict) -> dict[str, tuple[float, float, float]]:
    """Per part: (wall s, serial CPU s, parallel CPU s). A chunk-parallel stage's serial part is its main
    process (reading, dispatching, writing), its parallel part the workers' CPU. learn-bpe is split into
    its logged phases: word counting runs in subword-nmt's workers, the merge loop and the
    vocabularies in the main process."""
    parts = {}
    for name, st in res["stages"].items():
        if st["phases"]:
            for phase, secs in st["phases"].items():
                parallel = PARALLEL[f"{name}:{phase}"]
                parts[f"{name}:{phase}"] = (
                    secs,
                    0.0 if parallel else secs,
                    secs * res["workers"] if parallel else 0.0,
                )
        elif st["worker_cpu_s"] > 0:
            parts[name] = (st["wall_s"], st["main_cpu_s"], st["worker_cpu_s"])
        else:
            parts[name] = (st["wall_s"], st["wall_s"], 0.0)
    return parts


def _growth_table(results: list[dict], sizes: list[int], workers: int) -> dict:
    """Print and return each stage's fitted time and memory growth against the corpus size."""
    print(
        f"\nfitted growth against corpus size ({', '.join(f'{s:,}' for s in sizes)} pairs), {workers} workers"
    )
    print(f"{'stage':<18} {'time ~ N^b':>10} {'mem ~ N^b':>10} {'mem ratio last two':>19} {'peak MB':>8}")
    summary: dict = {"stages": {}, "parts": {}}
    for name in results[0]["stages"]:
        times = [r["stages"][name]["wall_s"] for r in results]
        mems = [r["stages"][name]["peak_pss_mb"] for r in results]
        bt, _ = fit_power(sizes, times)
        bm, _ = fit_power(sizes, mems)
        ratio = mems[-1] / mems[-2] if len(mems) > 1 else float("nan")
        summary["stages"][name] = {"time_exponent": bt, "mem_exponent": bm, "mem_ratio_last_two": ratio,
                                   "peak_mb": mems[-1]}  # fmt: skip
        print(f"{name:<18} {bt:>10.2f} {bm:>10.2f} {ratio:>19.2f} {mems[-1]:>8.0f}")
    return summary


def summarize(
    results: list[dict],
    workers: int,
    target: int,
    node_cores: int,
    target_types: int | None = None,
    merge_exponent: float | None = None,
) -> dict:
    sizes = [r["pairs"] for r in results]
    if "learn-bpe" not in results[0]["stages"]:  # --stages without it: the growth table only
        return _growth_table(results, sizes, workers)
    types = [r["word_types"] for r in results]
    type_growth, _ = fit_power(sizes, types)
    predicted_types = types[-1] * (target / sizes[-1]) ** type_growth
    merge_on_types, _ = fit_power(types, [r["stages"]["learn-bpe"]["phases"]["merge"] for r in results])
    fitted_merge = merge_on_types
    if merge_exponent is not None:
        merge_on_types = merge_exponent
    types_there = target_types or predicted_types
    print(
        f"\nword types (both sides): {', '.join(f'{t:,}' for t in types)} ~ N^{type_growth:.2f}; at {target:,} "
        f"pairs {predicted_types:,.0f} by that fit"
        + (f", {target_types:,} as given" if target_types else "")
        + f"; the merge loop grows as types^{fitted_merge:.2f}"
        + (f" (extrapolated as types^{merge_exponent:.2f}, as given)" if merge_exponent is not None else "")
    )
    summary = _growth_table(results, sizes, workers)

    print(
        f"\nextrapolated to {target:,} pairs on a {node_cores}-core node (from the {sizes[-1]:,}-pair run): each "
        f"part's serial and parallel CPU seconds grow as its fitted N^b (at least linearly where it streams "
        f"lines), and take max(serial, parallel / {node_cores}) there"
    )
    print(
        f"{'part':<22} {'N^b':>5} {'wall s':>8} {'serial s':>9} {'parallel s':>10} {'there min':>10} {'bound by':>9}"
    )
    total = whole_bpe = on_sample = 0.0
    parts_by_size = [stage_parts(r) for r in results]
    for part in parts_by_size[-1]:
        b, _ = fit_power(sizes, [p[part][0] for p in parts_by_size])
        if not part.startswith("learn-bpe:merge") and not part.startswith("learn-bpe:vocab"):
            b = max(b, 1.0)  # streams every line: at least linear (small-size overheads flatten the fit)
        wall, serial, parallel = parts_by_size[-1][part]
        scale = (target / sizes[-1]) ** b
        if part in ("learn-bpe:merge", "learn-bpe:vocab"):  # their cost follows the word types
            b = merge_on_types
            scale = (types_there / types[-1]) ** b
        if part in (f"{SAMPLE_STAGE}:merge", f"{SAMPLE_STAGE}:vocab"):  # a sample of the same size there
            b, scale = 0.0, 1.0
        serial_there, parallel_there = serial * scale, parallel * scale / node_cores
        there = max(serial_there, parallel_there)
        if part.startswith(SAMPLE_STAGE):
            on_sample += there
        else:
            total += there
            whole_bpe += there if part.startswith("learn-bpe:") else 0.0
        bound = "serial" if serial_there >= parallel_there else "workers"
        summary["parts"][part] = {"exponent": b, "wall_s": wall, "serial_cpu_s": serial, "parallel_cpu_s": parallel,
                                  "minutes_there": there / 60, "bound_by": bound}  # fmt: skip
        print(
            f"{part:<22} {b:>5.2f} {wall:>8.1f} {serial:>9.1f} {parallel:>10.1f} {there / 60:>10.1f} {bound:>9}"
        )
    print(f"{'total':<22} {'':>5} {'':>8} {'':>9} {'':>10} {total / 60:>10.1f}")
    if on_sample:
        with_sample = total - whole_bpe + on_sample
        print(f"{'total, BPE on a sample':<22} {'':>5} {'':>8} {'':>9} {'':>10} {with_sample / 60:>10.1f}")
        summary["total_minutes_there_bpe_on_sample"] = with_sample / 60
    summary["total_minutes_there"] = total / 60
    summary["word_types"] = {"measured": types, "exponent": type_growth, "there": types_there}
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="250k,1M,4M", help="corpus sizes in pairs, comma-separated")
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--merges", type=int, default=40000)
    p.add_argument("--target-pairs", type=parse_size, default=parse_size("40.8M"))
    p.add_argument("--node-cores", type=int, default=16)
    p.add_argument("--work-dir", type=Path, default=None, help="keep the corpora here (default: a temp dir)")
    p.add_argument(
        "--target-types",
        type=parse_size,
        default=None,
        help="word types of the real corpus (both sides), for learn-bpe's merge loop (default: fitted)",
    )
    p.add_argument(
        "--merge-exponent",
        type=float,
        default=None,
        help="extrapolate learn-bpe's merge loop as types^E (default: the fitted E; 1.0 is the linear bound)",
    )
    p.add_argument(
        "--stages", default=None, help="only these stages, comma-separated and in order (e.g. preprocess)"
    )
    p.add_argument(
        "--bpe-sample-lines",
        type=parse_size,
        default=0,
        help="also run learn-bpe --sample-lines N on the same text (measured beside the whole-corpus run)",
    )
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--from-json", type=Path, default=None, help="re-print the summary of an earlier run")
    args = p.parse_args()
    if args.from_json:
        earlier = json.loads(args.from_json.read_text())
        workers = earlier["sizes"][0]["workers"]
        summarize(
            earlier["sizes"],
            workers,
            args.target_pairs,
            args.node_cores,
            args.target_types,
            args.merge_exponent,
        )
        return 0
    sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    only = args.stages.split(",") if args.stages else None
    if only is not None and tuple(only) != STAGES[: len(only)]:
        # each stage reads the one before it: anything but a prefix would fail after the corpus is made
        p.error(f"--stages must be a prefix of {','.join(STAGES)}, got {args.stages}")
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        results = []
        for pairs in sizes:
            results.append(
                bench_size(Path(tmp), pairs, args.workers, args.merges, only, args.bpe_sample_lines)
            )
            r = results[-1]
            types = f", {r['word_types']:,} word types (both sides)" if r["word_types"] >= 0 else ""
            print(f"  {pairs:,} pairs: {r['kept_pairs']:,} kept after cleaning{types}, corpus generated "
                  f"in {r['generate_s']:.0f} s", flush=True)  # fmt: skip
    summary = summarize(
        results, args.workers, args.target_pairs, args.node_cores, args.target_types, args.merge_exponent
    )
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                         "sizes": results, "summary": summary}, indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
