"""Issue 56's measured GPU demo: a pilot, then `make demo-gpu`'s own Snakemake command, timed.

    python bench/gpu_demo_run.py --pilot --out DIR [--timeout 420]   # 1 epoch / 100 updates a model
    python bench/gpu_demo_run.py --out DIR [--timeout 560]           # the demo itself
    python bench/gpu_demo_run.py --cpu-smoke [--pilot] --out DIR     # the same on a CPU, tiny (plumbing)

Both run the snakemake line that ``make -n demo-gpu`` prints (GPU_JOBS slots on the one card), from this
checkout, with this interpreter's environment: no ``make setup`` (a GPU machine may have no package
index; install first, docs/gpu.md). A run cut short by ``--timeout`` is stopped as Ctrl-C stops it
(SIGINT to its process group, SIGKILL 90 s later): the next call resumes it (checkpoints, finished jobs)
and the walls of all calls add up in ``DIR/gpu_demo[_pilot].json``.

The pilot writes, per training job, its seconds per update (the trainer's history log's first line to
its trained.json) and projects the full run: pilot wall + sum over jobs of seconds per update x the
updates the full run adds, / GPU_JOBS (the jobs share the card as in the pilot). The full run copies
results/gpu_demo/{tables.md, stability_map.md, plots/*.png} to DIR/gpu_demo/ and checks the issue's
targets: every depth-study model that converged at >= 20 sacreBLEU; deep post-LN diverged or more than
1 sacreBLEU behind Admin and pre-LN at its depth; the deepest Admin at least as good as 6L-6L Admin.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pipeline_lib.atomic import write_json  # noqa: E402
from pipeline_lib.workflow.cli_check_config import check  # noqa: E402

CONFIG = "config.gpu_demo.yaml"
PILOT = "bench/gpu_demo_pilot.yaml"
CPU = "config.gpu_demo_cpu.yaml"
TARGET_BLEU = 20.0
MARGIN_BLEU = 1.0  # "trails": post-LN more than this below both Admin and pre-LN at its depth


def demo_gpu_words() -> list[str]:
    """The snakemake command of `make demo-gpu`, as make prints it."""
    out = subprocess.run(
        ["make", "-n", "-s", "demo-gpu"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    line = next(x for x in out.stdout.splitlines() if "snakemake " in x)
    return shlex.split(line.split("&&", 1)[1])


def command(pilot: bool, cpu: bool) -> tuple[list[str], list[str]]:
    """(argv, config files) of the run: make's line, profiles/local by path, the overlays added."""
    words = demo_gpu_words()
    assert words[:4] == ["snakemake", "--profile", "local", "all"], words
    i = words.index("--configfile") + 1
    j = next((k for k in range(i, len(words)) if words[k].startswith("-")), len(words))
    configs = words[i:j] + ([PILOT] if pilot else []) + ([CPU] if cpu else [])
    rest = words[4 : i - 1] + words[j:]
    if cpu:  # no GPU slots on a CPU machine: the overlay drops the jobs' GPU resources
        rest = ["--cores", "2"]
    argv = [  # `-m`: wheels installed with --target (bench/peers/offline_setup.sh) bring no scripts
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        str(ROOT / "profiles" / "local"),
        "all",
        *rest,
        "--configfile",
        *configs,
    ]
    return argv, configs


def run(argv: list[str], timeout: float, log: Path) -> tuple[int | None, float]:
    """Run to the end or ``timeout``; a timeout stops it as Ctrl-C does (resumable). (rc, wall)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n===== {dt.datetime.now().isoformat(timespec='seconds')} {shlex.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = None
    return rc, time.perf_counter() - started


def merged_config(configs: list[str]) -> dict:
    """The config the workflow sees: the files merged as Snakemake merges them, the schema's defaults
    filled, at smoke scale when a file asks for it (the check-config stage's own reading)."""
    return check([ROOT / c for c in configs], ROOT).config


def job_rates(cfg: dict) -> dict[str, dict]:
    """Per training run: updates, and seconds per update (history log's first stamp to trained.json)."""
    work, logs = ROOT / cfg["workdir"], ROOT / cfg["results"] / "logs" / "train"
    rates = {}
    for exp in sorted((work / "experiments").iterdir()):
        status, trained = exp / "status.json", exp / "trained.json"
        history = logs / f"{exp.name}.history.log"
        if not (status.is_file() and trained.is_file() and history.is_file()):
            continue
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d+)", history.read_text())
        if not m:
            continue
        first = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
        st = json.loads(status.read_text())
        wall = trained.stat().st_mtime - first
        rates[exp.name] = {"status": st["status"], "updates": st["update"], "wall_s": round(wall, 1),
                           "s_per_update": wall / max(1, st["update"])}  # fmt: skip
    return rates


def project(pilot: dict, rates: dict[str, dict], full_cfg: dict, jobs: int) -> dict:
    """The full run's wall from the pilot: pilot wall + the updates the full run adds, at the pilot's
    seconds per update, shared by ``jobs`` slots. Depth-study runs train ``max_epoch`` epochs of the
    pilot's one; a diverged deep post-LN run stops at ``divergence_after`` (taken as an upper bound)."""
    recipe = full_cfg["recipes"]["gpu_depth"]
    map_updates = full_cfg["stability_map"]["max_update"]
    extra = 0.0
    for name, r in rates.items():
        full = map_updates if name.startswith("stability-") else r["updates"] * recipe["max_epoch"]
        extra += max(0, full - r["updates"]) * r["s_per_update"]
    wall = pilot["wall_s"] + extra / jobs
    return {"projected_wall_s": round(wall), "projected_wall_min": round(wall / 60, 1), "gpu_jobs": jobs,
            "training_s_added_per_slot": round(extra / jobs)}  # fmt: skip


def claims(cfg: dict) -> dict:
    """The issue's targets, read from the score and status files of the finished run."""
    work, res = ROOT / cfg["workdir"], ROOT / cfg["results"]
    rows = {}
    for name, exp in cfg["experiments"].items():
        st = json.loads((work / "experiments" / name / "status.json").read_text())
        score_file = res / "experiments" / name / "test.score.json"
        scores = json.loads(score_file.read_text()).get("scores", {}) if score_file.is_file() else {}
        rows[name] = {"status": st["status"], "layers": (exp["encoder_layers"], exp["decoder_layers"]),
                      "residual": exp["residual"],
                      "bleu": scores.get("bleu", {}).get("score")}  # fmt: skip
    converged = {n: r for n, r in rows.items() if r["status"] == "completed"}
    out = {
        "rows": rows,
        # none converged is a miss, not a vacuous pass
        "converged_at_target": bool(converged)
        and all((r["bleu"] or 0) >= TARGET_BLEU for r in converged.values()),
    }
    deep = {r["layers"] for r in rows.values() if r["layers"][0] > 6}
    post_fails = {}
    for layers in sorted(deep):
        at = {r["residual"]: r for r in rows.values() if r["layers"] == layers}
        post = at.get("post_ln")
        others = [r["bleu"] or 0 for k, r in at.items() if k != "post_ln"]
        if post:
            trails = (post["bleu"] or 0) < min(others, default=0) - MARGIN_BLEU
            post_fails[f"{layers[0]}L-{layers[1]}L"] = post["status"] == "diverged" or trails
    out["deep_post_ln_fails_or_trails"] = post_fails
    admin = sorted((r["layers"], r["bleu"] or 0) for r in rows.values() if r["residual"] == "admin")
    if admin:
        out["deepest_admin_at_least_6L6L"] = admin[-1][1] >= admin[0][1]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pilot", action="store_true", help="the pilot: 1 epoch / 100 updates a model")
    p.add_argument("--timeout", type=float, default=560, help="seconds; a cut-short run resumes next call")
    p.add_argument("--cpu-smoke", action="store_true", help="add config.gpu_demo_cpu.yaml, no GPU slots")
    p.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    name = "gpu_demo_pilot" if args.pilot else "gpu_demo"
    report_file = args.out / f"{name}.json"
    report = json.loads(report_file.read_text()) if report_file.is_file() else {"calls": []}
    argv, configs = command(args.pilot, args.cpu_smoke)
    cfg = merged_config(configs)
    rc, wall = run(argv, args.timeout, args.out / f"{name}.log")
    report["calls"].append({"date": dt.datetime.now().isoformat(timespec="seconds"), "argv": shlex.join(argv),
                            "rc": rc, "wall_s": round(wall, 1)})  # fmt: skip
    report["wall_s"] = round(sum(c["wall_s"] for c in report["calls"]), 1)
    report["status"] = "ok" if rc == 0 else ("cut short: call again to resume" if rc is None else "failed")
    if rc == 0 and args.pilot:
        report["jobs"] = job_rates(cfg)
        jobs = int(argv[argv.index("--resources") + 1].split("=")[1]) if "--resources" in argv else 2
        full = merged_config([c for c in configs if c != PILOT])
        report["projection"] = project(report, report["jobs"], full, jobs)
    elif rc == 0:
        report["targets"] = claims(cfg)
        dest = args.out / name
        (dest / "plots").mkdir(parents=True, exist_ok=True)
        results = ROOT / cfg["results"]
        for f in ("tables.md", "stability_map.md"):
            shutil.copy2(results / f, dest / f)
        for png in (results / "plots").glob("*.png"):
            shutil.copy2(png, dest / "plots" / png.name)
    write_json(report_file, report)
    if args.json:
        write_json(args.json, report)
    print(json.dumps({k: v for k, v in report.items() if k != "jobs"}, indent=1))
    sys.exit(0 if rc == 0 else 1)


if __name__ == "__main__":
    main()
