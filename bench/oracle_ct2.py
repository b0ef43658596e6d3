"""Our beam search against CTranslate2's on the same exported weights, on a real test set.

    .venv/bin/python bench/oracle_ct2.py --checkpoint work/experiments/<exp>/checkpoint_avg.pt \\
        --input work/data/<ds>/bpe-test/test.en [--beam 4 --lenpen 1.0 --max-len 200]

Prints how many best hypotheses are identical (and their largest score difference) with the settings
that make the two searches comparable (``ct2_search_options``: min_len 0, </s> counted in the
length penalty, one absolute length limit), and how many of ours reached that limit, where the two
searches end differently by design.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from pipeline_lib.atomic import write_json
from pipeline_lib.cli import main as cli_main
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.export.ctranslate2 import ct2_search_options
from pipeline_lib.export.plain import load_export_source


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--input", required=True, help="BPE source lines")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=1.0)
    p.add_argument("--max-len", type=int, default=200, help="absolute length limit (tokens before </s>)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    import ctranslate2

    torch.set_num_threads(args.threads)
    source = load_export_source(args.checkpoint)
    lines = [line.split() for line in Path(args.input).read_text(encoding="utf-8").splitlines()]
    ids = [source.vocab.encode(line) for line in lines]
    cfg = SearchConfig(beam=args.beam, nbest=1, lenpen=args.lenpen, min_len=0, max_len_b=args.max_len)
    ours = translate(source.model, ids, cfg, progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ct2"
        argv = ["export", "--checkpoint", args.checkpoint, "--format", "ctranslate2", "--out", str(out)]
        assert cli_main(argv) == 0
        translator = ctranslate2.Translator(
            str(out), device="cpu", compute_type="float32", intra_threads=args.threads
        )
        theirs = translator.translate_batch(lines, **ct2_search_options(cfg, args.max_len))
    same, at_limit, worst = 0, 0, 0.0
    for nbest, result in zip(ours, theirs, strict=True):
        hyp = [source.vocab.token(i) for i in nbest[0].tokens] + ["</s>"]
        at_limit += len(nbest[0].tokens) >= args.max_len
        if result.hypotheses[0] == hyp:
            same += 1
            worst = max(worst, abs(result.scores[0] - nbest[0].score))
    summary = {
        "checkpoint": args.checkpoint, "residual": source.residual, "sentences": len(lines),
        "identical": same, "max_abs_score_diff": worst, "ours_at_length_limit": at_limit,
        "beam": args.beam, "lenpen": args.lenpen, "max_len": args.max_len,
        "ctranslate2": ctranslate2.__version__,
    }  # fmt: skip
    print(json.dumps(summary))
    if args.json:
        write_json(args.json, summary, ensure_ascii=True)


if __name__ == "__main__":
    main()
