"""Training memory against depth, with and without activation checkpointing, and its time cost.

    .venv/bin/python bench/depth_memory.py [--depths 6-6,18-6,36-6,6-12,36-12,60-12] [--tokens 3584]
                                           [--device cpu|cuda] [--amp none|bf16|fp16]

Each (depth, checkpointing) point runs in a fresh process: a base-width model (512/2048/8 heads, a
32k joint vocabulary), Adam, and one batch of --tokens target tokens (and as many source tokens).
Update 1 allocates gradients and Adam's state; update 2 is measured. "static" is the memory after
update 1 (weights, gradients, Adam moments), "peak" the high-water mark during update 2, and
"activations" their difference. On a CPU the measure is the process's resident set (fp32; the peak
is reset through /proc/self/clear_refs before update 2); on a GPU torch.cuda.max_memory_allocated.
The activation cost is then fitted as a + b_enc·E + b_dec·D (least squares) and extrapolated to the
paper's 60L-12L, against a 16 GB GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

MB = 2**20


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(enc: int, dec: int, tokens: int, checkpointing: bool, device: str, amp: str) -> dict:
    import torch
    import torch.nn.functional as F

    from pipeline_lib.model import ModelConfig, build_model

    torch.manual_seed(0)
    vocab, length = 32000, 32
    cfg = ModelConfig(
        vocab, vocab, encoder_layers=enc, decoder_layers=dec, d_model=512, ffn_dim=2048, heads=8
    )
    model = build_model(cfg).to(device).train()
    model.set_activation_checkpointing(checkpointing)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rows = tokens // length
    src = torch.randint(4, vocab, (rows, length), device=device)
    prev = torch.randint(4, vocab, (rows, length), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)

    def update() -> float:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
            logits = model(src, prev)
        F.cross_entropy(logits.float().flatten(0, 1), prev.flatten()).backward()
        optimizer.step()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    update()
    if device == "cuda":
        static = torch.cuda.memory_allocated() / MB
        torch.cuda.reset_peak_memory_stats()
    else:
        static = _rss_mb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM, the peak resident set
    seconds = update()
    peak = torch.cuda.max_memory_allocated() / MB if device == "cuda" else _rss_mb("VmHWM")
    return {"enc": enc, "dec": dec, "ckpt": checkpointing, "params": model.num_parameters(),
            "static_mb": static, "peak_mb": peak, "activations_mb": peak - static, "seconds": seconds}  # fmt: skip


def run_point(args: argparse.Namespace, enc: int, dec: int, checkpointing: bool) -> dict:
    cmd = [sys.executable, __file__, "--child", f"{enc}-{dec}", "--tokens", str(args.tokens),
           "--device", args.device, "--amp", args.amp, *(["--checkpoint"] if checkpointing else [])]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fit(points: list[dict]) -> tuple[float, float, float]:
    """Least squares activations_mb = a + b_enc·E + b_dec·D."""
    import numpy as np

    design = np.array([[1.0, p["enc"], p["dec"]] for p in points])
    target = np.array([p["activations_mb"] for p in points])
    a, b_enc, b_dec = np.linalg.lstsq(design, target, rcond=None)[0]
    return float(a), float(b_enc), float(b_dec)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depths", default="6-6,18-6,36-6,6-12,36-12,60-12")
    p.add_argument("--tokens", type=int, default=3584)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        enc, dec = map(int, args.child.split("-"))
        print(json.dumps(measure(enc, dec, args.tokens, args.checkpoint, args.device, args.amp)))
        return

    depths = [tuple(map(int, d.split("-"))) for d in args.depths.split(",")]
    kind = "peak RSS, fp32" if args.device == "cpu" else f"max_memory_allocated, amp {args.amp}"
    print(f"{args.tokens} target tokens per update, base width, 32k vocabulary; memory = {kind}\n")
    print(
        "| depth | params | static MB | activations MB | ckpt activations MB | memory ratio | s/update | ckpt s/update | time ratio |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    results: dict[bool, list[dict]] = {False: [], True: []}
    for enc, dec in depths:
        plain, ckpt = run_point(args, enc, dec, False), run_point(args, enc, dec, True)
        results[False].append(plain)
        results[True].append(ckpt)
        print(
            f"| {enc}L-{dec}L | {plain['params'] / 1e6:.0f}M | {plain['static_mb']:,.0f} | "
            f"{plain['activations_mb']:,.0f} | {ckpt['activations_mb']:,.0f} | "
            f"{ckpt['peak_mb'] / plain['peak_mb']:.2f} | {plain['seconds']:.2f} | {ckpt['seconds']:.2f} | "
            f"{ckpt['seconds'] / plain['seconds']:.2f} |",
            flush=True,
        )
    if len(depths) >= 3:
        print("\nFitted activation memory, a + b_enc·E + b_dec·D (MB), and 60L-12L from the fit:")
        for checkpointing in (False, True):
            a, b_enc, b_dec = fit(results[checkpointing])
            name = "checkpointed" if checkpointing else "plain"
            print(f"- {name}: a = {a:,.0f}, per encoder layer {b_enc:,.1f}, per decoder layer {b_dec:,.1f}; "
                  f"60L-12L activations {a + 60 * b_enc + 12 * b_dec:,.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
