"""Decoding throughput of `translate`'s search on CPU or GPU: sentences/s and tokens/s.

A random-init 6L-6L Transformer (d=256, 4 heads, FFN 1024, post-LN, joint vocabulary) decodes
synthetic sources at beam 4 and beam 1 (greedy), with the incremental cache on and off:

* ``fixed``: every hypothesis is exactly 30 tokens + </s> (--min-len 30, max length 0*src+30), the
  setting of the peer-toolkit numbers in shared/REFERENCE.md (fairseq beam 4: 45.5 sent/s);
* ``natural``: the model stops where it likes (max length 1.2*src + 10).

tokens/s counts the best hypothesis' tokens (</s> included), as fairseq-generate reports it.

    .venv/bin/python bench/decode_throughput.py [--sentences 500] [--threads 2] [--vocab 8000]
    python bench/decode_throughput.py --device cuda --bf16 --d-model 512 --ffn 2048 --heads 8 --profile
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import torch

from pipeline_lib.cpu.allocator import keep_freed_memory
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--no-cache-sentences", type=int, default=100, help="cache-off runs are slow: fewer")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--src-len", type=int, nargs=2, default=(20, 40), help="uniform source length range")
    p.add_argument("--max-tokens", type=int, default=6000)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--beams", type=int, nargs="+", default=[4, 1])
    p.add_argument("--modes", nargs="+", default=["fixed", "natural"])
    p.add_argument("--skip-no-cache", action="store_true")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (GPU)")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--profile", action="store_true", help="torch.profiler over one beam-4 fixed-length batch")
    p.add_argument(
        "--default-malloc",
        action="store_true",
        help="skip keep_freed_memory(), which `translate` applies",
    )
    args = p.parse_args()
    if not args.default_malloc:
        keep_freed_memory()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=args.vocab,
        tgt_vocab_size=args.vocab,
        encoder_layers=6,
        decoder_layers=6,
        d_model=args.d_model,
        ffn_dim=args.ffn,
        heads=args.heads,
        dropout=0.1,
    )
    model = build_model(config).eval().to(args.device)
    rng = np.random.default_rng(0)
    lengths = rng.integers(args.src_len[0], args.src_len[1] + 1, size=args.sentences)
    sources = [rng.integers(4, args.vocab, size=n).tolist() for n in lengths]
    print(
        f"model {config.describe()} vocab {args.vocab}, {args.sentences} sentences of "
        f"{args.src_len[0]}-{args.src_len[1]} tokens, {torch.get_num_threads()} threads, "
        f"max_tokens {args.max_tokens}, batch_size {args.batch_size}"
    )
    run = functools.partial(translate, max_tokens=args.max_tokens, batch_size=args.batch_size, bf16=args.bf16,
                            progress=False)  # fmt: skip
    run(model, sources[:16], SearchConfig(beam=4, max_len_b=5))  # warm-up
    if args.profile:
        profile_batch(run, model, sources[: args.batch_size], args.device)

    header = f"{'mode':8} {'beam':>4} | {'cache sent/s':>12} {'tok/s':>8} | {'no-cache sent/s':>15} {'tok/s':>8} | ratio"
    print(header)
    print("-" * len(header))
    for mode in args.modes:
        for beam in args.beams:
            if mode == "fixed":
                kw = {"min_len": 30, "max_len_a": 0.0, "max_len_b": 30}
            else:
                kw = {"max_len_a": 1.2, "max_len_b": 10}
            row = []
            for use_cache in (True, False):
                if not use_cache and args.skip_no_cache:
                    row.append((float("nan"), float("nan")))
                    continue
                subset = sources if use_cache else sources[: args.no_cache_sentences]
                cfg = SearchConfig(beam=beam, use_cache=use_cache, **kw)
                start = time.perf_counter()
                hyps = run(model, subset, cfg)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - start
                tokens = sum(len(h[0].tokens) + 1 for h in hyps)
                row.append((len(subset) / elapsed, tokens / elapsed))
            (s1, t1), (s0, t0) = row
            print(f"{mode:8} {beam:>4} | {s1:12.1f} {t1:8.0f} | {s0:15.1f} {t0:8.0f} | {s1 / s0:5.2f}x")


def profile_batch(run, model, batch: list[list[int]], device: str) -> None:  # noqa: ANN001
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    cfg = SearchConfig(beam=4, min_len=30, max_len_a=0.0, max_len_b=30)
    with profile(activities=acts) as prof:
        run(model, batch, cfg)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))


if __name__ == "__main__":
    main()
