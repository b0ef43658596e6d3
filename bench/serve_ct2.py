"""Serving speed: our `translate` beside CTranslate2 (fp32 and int8) on the same exported model.

    .venv/bin/python bench/serve_ct2.py [--checkpoint CKPT --input BPE_TEXT] [--threads 2] [--json OUT]

With a checkpoint and its BPE test set, both decode those. Without, a model of compare.py's shape
(6L-6L d=256, 4 heads, FFN 1024, 8k joint vocabulary, untrained) decodes synthetic sources. Every
output is exactly --fixed-len tokens + </s> (min = max length in both decoders), so the work is the
same whatever the weights; beam 4, batches of --batch-size sentences, one process, --threads threads.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pipeline_lib.atomic import write_json
from pipeline_lib.checkpoint import save_checkpoint
from pipeline_lib.cli import main as cli_main
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.export.plain import load_export_source
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model


def synthetic_checkpoint(root: Path, vocab_size: int) -> Path:
    torch.manual_seed(0)
    vocab = Vocabulary([f"w{i}" for i in range(vocab_size - 4)])
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    vocab.save(bin_dir / "vocab.txt")
    (bin_dir / "meta.json").write_text(json.dumps({"src_lang": "src", "tgt_lang": "tgt"}), encoding="utf-8")
    config = ModelConfig(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, encoder_layers=6, decoder_layers=6,
        d_model=256, ffn_dim=1024, heads=4,
    )  # fmt: skip
    state = {
        "model_config": config.to_dict(), "model": build_model(config).state_dict(),
        "data": {"bin_dir": str(bin_dir), "src_lang": "src", "tgt_lang": "tgt"}, "num_updates": 0,
        "epoch": 0, "status": "ok",
    }  # fmt: skip
    path = root / "checkpoint.pt"
    save_checkpoint(state, path)
    return path


def synthetic_lines(n: int, vocab_size: int) -> list[list[str]]:
    rng = np.random.default_rng(1)
    return [[f"w{i}" for i in rng.integers(0, vocab_size - 4, int(rng.integers(10, 31)))] for _ in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint")
    p.add_argument("--input", help="BPE source lines (with --checkpoint)")
    p.add_argument("--sentences", type=int, default=300)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--fixed-len", type=int, default=30)
    p.add_argument("--json", type=Path, default=Path("bench/results/serve_ct2.json"))
    args = p.parse_args()
    import ctranslate2

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        checkpoint = args.checkpoint or synthetic_checkpoint(root, 8000)
        source = load_export_source(str(checkpoint))
        if args.input:
            lines = [line.split() for line in Path(args.input).read_text(encoding="utf-8").splitlines()]
        else:
            lines = synthetic_lines(args.sentences, len(source.vocab))
        lines = lines[: args.sentences]
        assert (
            cli_main(
                [
                    "export",
                    "--checkpoint",
                    str(checkpoint),
                    "--format",
                    "ctranslate2",
                    "--out",
                    str(root / "ct2"),
                ]
            )
            == 0
        )
        cfg = SearchConfig(beam=args.beam, min_len=args.fixed_len, max_len_b=args.fixed_len)
        ids = [source.vocab.encode(line) for line in lines]
        rows = []
        start = time.perf_counter()
        translate(source.model, ids, cfg, max_tokens=None, batch_size=args.batch_size, progress=False)
        rows.append(("ours (torch fp32)", time.perf_counter() - start))
        for compute_type in ("float32", "int8"):
            translator = ctranslate2.Translator(
                str(root / "ct2"), device="cpu", compute_type=compute_type, inter_threads=1,
                intra_threads=args.threads,
            )  # fmt: skip
            start = time.perf_counter()
            translator.translate_batch(
                lines, max_batch_size=args.batch_size, beam_size=args.beam, length_penalty=1.0,
                min_decoding_length=args.fixed_len, max_decoding_length=args.fixed_len + 1, max_input_length=0,
            )  # fmt: skip
            rows.append(
                (f"CTranslate2 {ctranslate2.__version__} {compute_type}", time.perf_counter() - start)
            )
    model = source.model.config.describe()
    print(f"{len(lines)} sentences, {model}, beam {args.beam}, {args.fixed_len} tokens + </s> each, "
          f"batch {args.batch_size}, {args.threads} threads, CPU")  # fmt: skip
    print(f"{'decoder':<32} {'seconds':>8} {'sent/s':>8} {'vs ours':>8}")
    for name, seconds in rows:
        print(f"{name:<32} {seconds:8.2f} {len(lines) / seconds:8.1f} {rows[0][1] / seconds:7.2f}x")
    result = {
        "model": model, "sentences": len(lines), "beam": args.beam, "fixed_len": args.fixed_len,
        "batch_size": args.batch_size, "threads": args.threads, "checkpoint": str(args.checkpoint),
        "rows": [{"decoder": n, "seconds": s, "sentences_per_s": len(lines) / s} for n, s in rows],
    }  # fmt: skip
    write_json(args.json, result, ensure_ascii=True)


if __name__ == "__main__":
    main()
