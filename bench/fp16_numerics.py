"""The fp16 numerics of the authors' fairseq, measured on a GPU in one run (docs/numerics.md).

    python bench/fp16_numerics.py --out bench/results            # on a GPU, with the fairseq peer venv
    .venv/bin/python bench/fp16_numerics.py --cpu-smoke --out /tmp/n   # the plumbing, tiny, on the CPU

1. ``trajectory``: our ``amp: fairseq_fp16`` against fairseq ``--fp16`` (the authors' scaler flags),
   6L-6L and 18L-6L post-LN at base width, 600 update attempts on the same batches from the same
   weights: the loss-scale sequences side by side, the overflows of each, the losses
   (``tests/export/test_fairseq_trajectory.py -k fp16``; needs ``bench/peers/install.sh fairseq``).
2. ``divergence``: a deep post-LN model without warm-up (RAdam, linear schedule, the Figure 10 recipe
   shape) at one seed under each precision mode (none, bf16, fp16 autocast, fairseq_fp16): whether it
   diverges, where, and by which clause.

One JSON (``fp16-numerics-<card>.json``) under ``--out``, rewritten after each part.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from pipeline_lib.atomic import write_json  # noqa: E402

MODES = ("none", "bf16", "fp16", "fairseq_fp16")


def trajectory(out_dir: Path) -> dict:
    env = {**os.environ, "DEEPNMT_TEST_PEERS": "1", "DEEPNMT_TRAJECTORY_OUT": str(out_dir)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-n", "0", "-p", "no:cacheprovider",
           str(ROOT / "tests/export/test_fairseq_trajectory.py"), "-k", "fp16_trajectory"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    cases = {p.stem: json.loads(p.read_text()) for p in sorted(out_dir.glob("fp16-*.json"))}
    return {"returncode": done.returncode, "tail": done.stdout[-3000:], "cases": cases}


def divergence(work: Path, smoke: bool, run_timeout: float) -> dict:
    from train_fixtures import make_bin_dir

    device = "cpu" if smoke else "cuda"
    # ~140 updates an epoch: each epoch end saves the 18L-18L's weights and Adam moments (1.7 GB)
    data = make_bin_dir(work / "data", n_train=200 if smoke else 100_000, vocab_words=40 if smoke else 2000)
    layers = "2" if smoke else "18"
    model = ["--d-model", "32", "--ffn-dim", "64", "--heads", "2"] if smoke else ["--arch", "base"]
    results = {}
    for mode in MODES:
        if smoke and mode == "fp16":
            continue  # autocast fp16 needs CUDA
        save = work / f"run-{mode}"
        argv = [
            sys.executable, "-m", "pipeline_lib", "train", "--data", str(data), "--source-lang", "xx",
            "--target-lang", "yy", "--save-dir", str(save), *model, "--encoder-layers", layers,
            "--decoder-layers", layers, "--residual", "post_ln", "--device", device, "--amp", mode,
            "--optimizer", "radam", "--adam-betas", "(0.9, 0.999)", "--lr", "5e-4", "--lr-scheduler", "linear",
            "--warmup-updates", "1", "--max-update", "60" if smoke else "600", "--max-tokens",
            "400" if smoke else "4096", "--seed", "1111", "--fp16-scale-window", "256",
            "--threshold-loss-scale", "0.03125", "--divergence-window", "20" if smoke else "100",
            "--progress", "none", "--log-interval", "10" if smoke else "100",
            # whether and where it diverges is read from the training losses: no dev points, one epoch kept
            "--validate-interval-updates", "0", "--keep-last-epochs", "1",
        ]  # fmt: skip
        start = time.perf_counter()
        try:
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=run_timeout)
            returncode, stderr = done.returncode, done.stderr
        except subprocess.TimeoutExpired as e:  # the other modes still run; this one says how far it got
            returncode = None
            stderr = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        status_file = save / "status.json"
        status = json.loads(status_file.read_text()) if status_file.is_file() else {}
        log = save / "train_log.jsonl"
        train = [json.loads(x) for x in log.read_text().splitlines()] if log.is_file() else []
        train = [r for r in train if r.get("kind") == "train"]
        results[mode] = {
            "returncode": returncode, "status": status.get("status", "timeout" if returncode is None else None),
            "update": status.get("update"),
            "criterion": status.get("criterion"), "reason": status.get("reason"),
            "last_nll_bits": train[-1]["nll_loss"] if train else None,
            "loss_scales": [r.get("loss_scale") for r in train], "wall_s": round(time.perf_counter() - start, 1),
            "last_logged_update": train[-1]["update"] if train else None, "stderr_tail": stderr[-800:],
        }  # fmt: skip
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cpu-smoke", action="store_true", help="the divergence part, tiny, on the CPU")
    ap.add_argument("--parts", nargs="+", default=["trajectory", "divergence"])
    ap.add_argument("--run-timeout", type=float, default=150, help="seconds for each divergence run")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    card = "cpu" if args.cpu_smoke else torch.cuda.get_device_name().replace(" ", "-").lower()
    result: dict = {"card": card, "torch": torch.__version__, "parts": {}}
    path = args.out / f"fp16-numerics-{card}.json"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for part in args.parts:
            if part == "trajectory" and not args.cpu_smoke:
                (work / "trajectory").mkdir()
                result["parts"]["trajectory"] = trajectory(work / "trajectory")
            elif part == "divergence":
                result["parts"]["divergence"] = divergence(work, args.cpu_smoke, args.run_timeout)
            write_json(path, result)
    print(json.dumps({k: v for k, v in result["parts"].get("divergence", {}).items()}, indent=1)[:4000])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
