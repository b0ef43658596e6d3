"""Model flags shared by `train` and `profile`: ``--arch`` plus the fields of ModelConfig."""

from __future__ import annotations

import argparse

from pipeline_lib.dataclass_cli import add_dataclass_arguments, cli_fields
from pipeline_lib.model.config import PRESETS, ModelConfig


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--arch", choices=sorted(PRESETS), default="base", help="width preset (d/FFN/heads)")
    add_dataclass_arguments(parser, ModelConfig, groups={"model": group})


def model_config_from_args(args: argparse.Namespace, src_vocab_size: int, tgt_vocab_size: int) -> ModelConfig:
    """The --arch preset, overridden by every model flag given (None: the preset's value)."""
    given = {f.name: getattr(args, f.name) for f in cli_fields(ModelConfig)}
    overrides = {name: value for name, value in given.items() if value is not None}
    return ModelConfig.from_preset(
        args.arch, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **overrides
    )
