"""Admin ω from the two profiling recursions, side by side, on one random-init model and batch.

    .venv/bin/python bench/admin_omega.py [--encoder-layers 18] [--decoder-layers 6] [--d-model 512]

``reference`` is the reference code's recursion (next total = Var[x_i·ω_i] + Var[f_i], measured as
the stream flows, ω applied); ``cumulative`` is ω_i = sqrt(1 + Σ_{j<i} Var f_j) with every ω = 1.
Same seed, same batch (random tokens, 32 sentences × 30 tokens), dropout on as in training.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.admin import RECURSIONS, AdminProfile, profile_model


def profiles(args: argparse.Namespace) -> dict[str, AdminProfile]:
    config = ModelConfig(
        src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, encoder_layers=args.encoder_layers,
        decoder_layers=args.decoder_layers, d_model=args.d_model, ffn_dim=4 * args.d_model,
        heads=args.d_model // 64, residual="admin", dropout=args.dropout,
    )  # fmt: skip
    g = torch.Generator().manual_seed(args.seed)
    src = torch.randint(4, args.vocab, (32, 30), generator=g)
    tgt = torch.randint(4, args.vocab, (32, 30), generator=g)
    prev = torch.cat([torch.full((32, 1), 2), tgt[:, :-1]], 1)
    out = {}
    for recursion in RECURSIONS:
        torch.manual_seed(args.seed)
        model = build_model(config)
        loss = lambda m: F.cross_entropy(m(src, prev).flatten(0, 1), tgt.flatten())  # noqa: E731
        out[recursion] = profile_model(model, loss, {"sentences": 32}, recursion)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encoder-layers", type=int, default=18)
    p.add_argument("--decoder-layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    result = profiles(args)
    ref, cum = result["reference"], result["cumulative"]
    for stack in ("encoder", "decoder"):
        print(f"{stack}: Var of the embedding output (first residual) {ref.residual_variances[stack][0]:.3f}")
        print("| sub-layer | ω reference | ω cumulative | ratio |")
        print("| ---: | ---: | ---: | ---: |")
        for i, (a, b) in enumerate(zip(ref.omegas[stack], cum.omegas[stack], strict=True)):
            print(f"| {i} | {a:.4f} | {b:.4f} | {a / b:.3f} |")
        print()


if __name__ == "__main__":
    main()
