"""`python -m pipeline_lib profile`: Admin's profiling pass, written to a JSON profile file.

The profile belongs in the experiment's own folder (the reference code's fixed file name in the
working directory makes concurrent runs overwrite each other). Profiling is a training step: it runs
the trainer's first batch (same data filter, batch plan and seed) through the trainer's loss.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import torch

from pipeline_lib.atomic import remove_stale_temp_files
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.dataclass_cli import add_dataclass_arguments
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.model.admin import closed_form_profile, profile_model
from pipeline_lib.model.cli_args import add_model_arguments, model_config_from_args
from pipeline_lib.model.registry import needs_profile
from pipeline_lib.model.transformer import build_model
from pipeline_lib.train.loss import label_smoothed_nll_loss
from pipeline_lib.train.profile_settings import MAX_PROFILE_TOKENS, ProfileSettings
from pipeline_lib.train.split_data import SplitData

log = logging.getLogger("pipeline_lib.profile")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_dataclass_arguments(parser, ProfileSettings)
    add_model_arguments(parser)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if not needs_profile(args.residual):
        raise ConfigError(f"profile: --residual {args.residual!r} takes no profile")
    if not 0 < args.max_tokens <= MAX_PROFILE_TOKENS:
        raise ConfigError(f"profile: --max-tokens must be in 1..{MAX_PROFILE_TOKENS}, got {args.max_tokens}")
    output = Path(args.output)
    remove_stale_temp_files(output.parent, target=output.name)  # a killed earlier save's
    vocab = Vocabulary.load(Path(args.data) / "vocab.txt")
    config = model_config_from_args(args, len(vocab), len(vocab))
    if args.closed_form:
        profile = closed_form_profile(config)
    else:
        train = SplitData(
            args.data, "train", args.source_lang, args.target_lang, args.max_tokens, config.max_positions,
            None, vocab.pad, vocab.bos, vocab.eos,
        )  # fmt: skip
        if len(train) == 0:
            raise InputError(f"{args.data}: no training pair fits in --max-tokens {args.max_tokens}")
        # The first batch of the first epoch, as the trainer draws it from the same seed.
        batch = train.collate(train.batches(args.seed, epoch=1, shuffle=True)[0]).to(args.device)
        torch.manual_seed(args.seed)
        model = build_model(config).to(args.device)

        def run_batch(m: torch.nn.Module) -> torch.Tensor:
            logits = m(batch.src_tokens, batch.prev_tokens)
            loss, _ = label_smoothed_nll_loss(logits, batch.target, args.label_smoothing, vocab.pad)
            return loss / batch.ntokens

        info = {"sentences": batch.nsentences, "target_tokens": batch.ntokens, "seed": args.seed}
        profile = profile_model(model, run_batch, info, args.recursion)
    profile.save(output)
    log.info("wrote %s (%s): %s", args.output, profile.method, json.dumps(profile.omegas)[:300])
    return 0
