"""Model flags shared by `train` and `profile` (fairseq-like names)."""

from __future__ import annotations

import argparse

from pipeline_lib.model.config import DLCL_NORMS, INITS, PRESETS, ModelConfig
from pipeline_lib.model.registry import residual_names


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--arch", choices=sorted(PRESETS), default="base", help="width preset (d/FFN/heads)")
    group.add_argument("--encoder-layers", type=int, default=6)
    group.add_argument("--decoder-layers", type=int, default=6)
    group.add_argument("--d-model", type=int, help="override the preset's d_model")
    group.add_argument("--ffn-dim", type=int, help="override the preset's FFN size")
    group.add_argument("--heads", type=int, help="override the preset's attention heads")
    group.add_argument("--residual", choices=residual_names(), default="post_ln")
    group.add_argument("--dlcl-norm", choices=DLCL_NORMS, default="pre")
    group.add_argument("--init", choices=INITS, default="xavier")
    group.add_argument("--dropout", type=float, default=0.1)
    group.add_argument("--attention-dropout", type=float, default=0.0)
    group.add_argument("--activation-dropout", type=float, default=0.0)
    group.add_argument("--max-positions", type=int, default=1024)
    group.add_argument("--no-share-all-embeddings", action="store_true", help="separate source/target tables")


def model_config_from_args(args: argparse.Namespace, src_vocab_size: int, tgt_vocab_size: int) -> ModelConfig:
    overrides = {
        name: getattr(args, name)
        for name in ("d_model", "ffn_dim", "heads")
        if getattr(args, name, None) is not None
    }
    return ModelConfig.from_preset(
        args.arch,
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        encoder_layers=args.encoder_layers,
        decoder_layers=args.decoder_layers,
        residual=args.residual,
        dlcl_norm=args.dlcl_norm,
        init=args.init,
        dropout=args.dropout,
        attention_dropout=args.attention_dropout,
        activation_dropout=args.activation_dropout,
        max_positions=args.max_positions,
        share_all_embeddings=not args.no_share_all_embeddings,
        **overrides,
    )
