"""Our beam search against fairseq-generate on the same exported weights, on a real test set.

    .venv/bin/python bench/oracle_fairseq.py --checkpoint work/experiments/<exp>/checkpoint_avg.pt \\
        --src work/data/<ds>/bpe-test/test.en --tgt work/data/<ds>/bpe-test/test.fr [--lenpen 1.0]

Needs the peer venv of `bench/peers/install.sh fairseq`. Exports the checkpoint (`export --format
fairseq`), binarizes the BPE test set with fairseq-preprocess from the exported dictionaries, runs
fairseq-generate (beam, lenpen, --max-len-a 0 --max-len-b N, --min-len 1) and our `translate` with
the same settings, and prints how many best hypotheses are identical and their largest score
difference (fairseq prints scores in base 2).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

import torch

from pipeline_lib.atomic import write_json
from pipeline_lib.cli import main as cli_main
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.export.fairseq import generate_hypotheses
from pipeline_lib.export.plain import load_export_source

PEER = Path(os.environ.get("DEEPNMT_BENCH_CACHE", Path.home() / ".cache/deepnmt-bench")) / "venvs/fairseq"
ENV = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # fairseq 0.12 checkpoints under torch 2.13


def run_peer(tool: str, *args: str) -> str:
    return subprocess.run(
        [str(PEER / "bin" / tool), *args], check=True, env=ENV, capture_output=True, text=True
    ).stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--src", required=True, help="BPE source lines")
    p.add_argument("--tgt", required=True, help="BPE target lines (fairseq-preprocess wants a pair)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=1.0)
    p.add_argument("--max-len", type=int, default=200)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    torch.set_num_threads(2)
    source = load_export_source(args.checkpoint)
    s, t = source.src_lang, source.tgt_lang
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        out = root / "fs"
        argv = ["export", "--checkpoint", args.checkpoint, "--format", "fairseq", "--out", str(out)]
        assert cli_main(argv) == 0
        raw = root / "raw"
        raw.mkdir()
        (raw / f"test.{s}").write_text(Path(args.src).read_text(encoding="utf-8"), encoding="utf-8")
        (raw / f"test.{t}").write_text(Path(args.tgt).read_text(encoding="utf-8"), encoding="utf-8")
        data = root / "data"
        run_peer(
            "fairseq-preprocess", "-s", s, "-t", t, "--srcdict", str(out / f"dict.{s}.txt"),
            "--tgtdict", str(out / f"dict.{t}.txt"), "--testpref", str(raw / "test"), "--destdir", str(data),
            "--workers", "1",
        )  # fmt: skip
        log = run_peer(
            "fairseq-generate", str(data), "--path", str(out / "checkpoint.pt"), "--gen-subset", "test",
            "-s", s, "-t", t, "--beam", str(args.beam), "--nbest", "1", "--lenpen", str(args.lenpen),
            "--max-len-a", "0", "--max-len-b", str(args.max_len), "--min-len", "1", "--batch-size", "32",
            "--required-batch-size-multiple", "1", "--cpu", "--seed", "1",
        )  # fmt: skip
    theirs = generate_hypotheses(log)
    lines = [line.split() for line in Path(args.src).read_text(encoding="utf-8").splitlines()]
    cfg = SearchConfig(beam=args.beam, lenpen=args.lenpen, max_len_b=args.max_len, min_len=1)
    ours = translate(source.model, [source.vocab.encode(line) for line in lines], cfg, progress=False)
    same, worst = 0, 0.0
    for i, nbest in enumerate(ours):
        score, text = theirs[i]
        if text == source.vocab.string(nbest[0].tokens):
            same += 1
            worst = max(worst, abs(score - nbest[0].score / math.log(2)))
    summary = {
        "checkpoint": args.checkpoint, "residual": source.residual, "sentences": len(lines),
        "identical": same, "max_abs_score_diff_base2": worst, "beam": args.beam, "lenpen": args.lenpen,
        "max_len": args.max_len,
    }  # fmt: skip
    print(json.dumps(summary))
    if args.json:
        write_json(args.json, summary, ensure_ascii=True)


if __name__ == "__main__":
    main()
