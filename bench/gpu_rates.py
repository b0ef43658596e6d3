"""The per-card rate table `plan` prices training with, built from the GPU results under bench/results/.

    python bench/gpu_rates.py            # rewrites pipeline_lib/workflow/gpu_rates.json
    python bench/gpu_rates.py --check    # exit 1 if the checked-in table differs from the results
    python bench/gpu_rates.py --also /root/out   # a GPU run's fresh results too (bench/gpu_evidence.py)

One row per measured training run of this trainer as the workflow runs it: no opt-in levers
(``--deferred-stats`` and ``--compile`` are off by default), no activation
checkpointing. A row keeps the card, the model's width and depths, the per-GPU ``max_tokens``, the
precision, the measured target tokens/s (aggregate over the timed updates), the FLOPs per target
token of that run and the matmul peak measured in the same run, whose ratio is the MFU that
``pipeline_lib/workflow/gpu_cost.py`` carries over to shapes not measured.
Sources: ``gpu-*-evidence.json`` (bench/gpu_evidence.py, the trainer's own loop) and the older
``gpu-*.json`` of bench/compare.py (its ``deepnmt`` toolkit's training).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
TABLE = ROOT / "pipeline_lib" / "workflow" / "gpu_rates.json"
_MODEL = re.compile(r"(\d+)L-(\d+)L d=(\d+)")
# The memory the cards' names stand for, GB as the datasheets give it (the plan's card.memory_gb).
CARD_MEMORY_GB = {"H200": 141, "H100 80GB": 80, "H100 NVL": 94, "H100 PCIe": 80, "A100-SXM4-80GB": 80}


def memory_of(card: str) -> int | None:
    return next((gb for name, gb in CARD_MEMORY_GB.items() if name in card), None)


def _row(
    card: str,
    model: str,
    max_tokens: int,
    precision: str,
    tok_s: float,
    flops: float,
    peak: float,
    source: str,
) -> dict:
    enc, dec, d = (int(g) for g in _MODEL.match(model).groups())  # type: ignore[union-attr]
    return {
        "card": card,
        "memory_gb": memory_of(card),
        "encoder_layers": enc,
        "decoder_layers": dec,
        "d_model": d,
        "max_tokens": max_tokens,
        "precision": precision,
        "tokens_per_s": round(tok_s, 1),
        "flops_per_target_token": round(flops),
        "matmul_peak_gflops": round(peak, 1),
        "mfu": round(tok_s * flops / (peak * 1e9), 4),
        "source": source,
    }


def evidence_rows(path: Path) -> list[dict]:
    report = json.loads(path.read_text())
    rows = []
    for name, step in sorted(report["steps"].items()):
        r = step.get("result") or {}
        if step.get("status") != "ok" or "tokens_per_s_aggregate" not in r or r.get("levers"):
            continue
        if r.get("device") != "cuda" or "matmul_peak_gflops" not in r:
            continue
        rows.append(
            _row(
                r["gpu"],
                r["model"],
                r["max_tokens"],
                r["amp"],
                r["tokens_per_s_aggregate"],
                r["flops_per_target_token"],
                r["matmul_peak_gflops"],
                f"{path.name}:{name}",
            )
        )
    return rows


def compare_rows(path: Path) -> list[dict]:
    report = json.loads(path.read_text())
    ours = (report.get("toolkits") or {}).get("deepnmt") or {}
    train, settings = ours.get("train") or {}, report.get("settings") or {}
    if (
        ours.get("status") != "ok"
        or "tokens_per_s_aggregate" not in train
        or settings.get("device") != "cuda"
        or settings.get("deepnmt_train_args")  # opt-in levers: not the workflow's default rate
    ):
        return []
    peak = report["matmul_peak_gflops"]
    peak = peak["used"] if isinstance(peak, dict) else peak
    return [
        _row(
            report["machine"]["gpu"],
            settings["model"],
            settings["max_tokens"] // settings.get("deepnmt_update_freq", 1),  # per micro-batch
            settings["precision"],
            train["tokens_per_s_aggregate"],
            report["flops"]["flops_per_target_token"],
            peak,
            path.name,
        )
    ]


def build(results: Path = RESULTS, also: tuple[Path, ...] = ()) -> list[dict]:
    """The rows of ``also`` (a GPU run's fresh results) first: on a tie the plan takes the first row."""
    rows = []
    for folder in (*also, results):
        for path in sorted(folder.glob("gpu-*.json")):
            rows += evidence_rows(path) if path.name.endswith("-evidence.json") else compare_rows(path)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare with the checked-in table, write nothing")
    p.add_argument(
        "--also", type=Path, nargs="+", default=[], help="more results folders, ahead of bench/results"
    )
    args = p.parse_args()
    rows = build(also=tuple(args.also))
    text = json.dumps(rows, indent=1) + "\n"
    if args.check:
        same = TABLE.is_file() and TABLE.read_text() == text
        print(f"{TABLE}: {'up to date' if same else 'differs from bench/results (run bench/gpu_rates.py)'}")
        return 0 if same else 1
    TABLE.write_text(text)
    print(f"wrote {TABLE}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
