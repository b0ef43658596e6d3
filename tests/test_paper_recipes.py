"""The paper configs' resolved commands against the values their sources give (a drift guard).

Each experiment's `train`, `average` and `translate` command lines are built by the workflow's own
code (pipeline_lib.workflow.Commands, what the rules run) and parsed back by the stages' own argument
parsers; the expected values are written out here, one table per config, from the papers and the
reference scripts as cited in the configs' comments. A later edit of a config that moves any of
them fails here and has to change this table too.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pipeline_lib.cli import build_parser
from pipeline_lib.workflow import Commands
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.cli_plan import effective_batch

REPO = Path(__file__).resolve().parent.parent

# (dropout, attention, activation), lr, warmup, max epochs, averaged checkpoints, beam, lenpen,
# target tokens per update: the recipe shared by every row of a config
RECIPES = {
    "config.wmt14_en_fr.yaml": ((0.2, 0.1, 0.1), 7e-4, 8000, 50, 10, 10, 1.0, 458_752),
    "config.wmt14_en_de.yaml": ((0.1, 0.1, 0.1), 1e-3, 4000, 50, 10, 4, 0.6, 114_688),
}
# experiment: (encoder layers, decoder layers, d_model, residual, GPUs)
ROWS = {
    "config.wmt14_en_fr.yaml": {
        "enfr_6L6L_default": (6, 6, 512, "post_ln", 4),
        "enfr_6L6L_preln": (6, 6, 512, "pre_ln", 4),
        "enfr_6L6L_admin": (6, 6, 512, "admin", 4),
        "enfr_60L12L_default": (60, 12, 512, "post_ln", 16),
        "enfr_60L12L_preln": (60, 12, 512, "pre_ln", 16),
        "enfr_60L12L_admin": (60, 12, 512, "admin", 16),
        "enfr_12L12L_admin": (12, 12, 512, "admin", 16),
        "enfr_24L12L_admin": (24, 12, 512, "admin", 16),
        "enfr_48L12L_admin": (48, 12, 512, "admin", 16),
        "enfr_36L36L_admin": (36, 36, 512, "admin", 16),
        "enfr_12L60L_admin": (12, 60, 512, "admin", 16),
        "enfr_6L6L_big_admin": (6, 6, 1024, "admin", 16),
        "enfr_12L12L_big_admin": (12, 12, 1024, "admin", 16),
        "enfr_24L12L_768_admin": (24, 12, 768, "admin", 16),
        "fren_6L6L_big_rev": (6, 6, 1024, "post_ln", 16),
        "enfr_6L6L_big_bt": (6, 6, 1024, "post_ln", 16),
        "enfr_60L12L_admin_bt": (60, 12, 512, "admin", 16),
        "enfr_36L12L_768_admin_bt": (36, 12, 768, "admin", 16),
    },
    "config.wmt14_en_de.yaml": {
        "ende_6L6L_default": (6, 6, 512, "post_ln", 4),
        "ende_6L6L_preln": (6, 6, 512, "pre_ln", 4),
        "ende_6L6L_admin": (6, 6, 512, "admin", 4),
        "ende_12L12L_default": (12, 12, 512, "post_ln", 16),
        "ende_12L12L_preln": (12, 12, 512, "pre_ln", 16),
        "ende_12L12L_admin": (12, 12, 512, "admin", 16),
        "ende_18L18L_default": (18, 18, 512, "post_ln", 16),
        "ende_18L18L_preln": (18, 18, 512, "pre_ln", 16),
        "ende_18L18L_admin": (18, 18, 512, "admin", 16),
        "ende_60L12L_default": (60, 12, 512, "post_ln", 16),
        "ende_60L12L_preln": (60, 12, 512, "pre_ln", 16),
        "ende_60L12L_admin": (60, 12, 512, "admin", 16),
    },
}


def _parse(stage: str, argv: str):
    return build_parser(stage).parse_args([stage, *shlex.split(argv)])


@pytest.mark.parametrize("config", list(ROWS))
def test_every_paper_experiment_resolves_to_its_sources_values(config: str, monkeypatch):
    monkeypatch.chdir(REPO)
    plan = check([Path(config)], REPO)
    commands = Commands(plan)
    assert set(plan.experiments) == set(ROWS[config]), "a row was added or removed: update ROWS"
    dropouts, lr, warmup, epochs, average, beam, lenpen, tokens = RECIPES[config]
    for name, (enc, dec, d_model, residual, gpus) in ROWS[config].items():
        train = _parse("train", commands.train(name, threads=1))
        got = {
            "layers": (train.encoder_layers, train.decoder_layers),
            "d_model": train.d_model or {"base": 512, "big": 1024, "768": 768}[train.arch],
            "residual": train.residual,
            "dropouts": (train.dropout, train.attention_dropout, train.activation_dropout),
            "lr": train.lr,
            "warmup": train.warmup_updates,
            "epochs": train.max_epoch,
            "optimizer": train.optimizer,
            "amp": train.amp,
        }
        want = {
            "layers": (enc, dec), "d_model": d_model, "residual": residual, "dropouts": dropouts, "lr": lr,
            "warmup": warmup, "epochs": epochs, "optimizer": "radam", "amp": "fp16",
        }  # fmt: skip
        assert got == want, name
        assert effective_batch(plan, name)[0] == gpus, name
        assert effective_batch(plan, name)[3] == tokens, name
        assert train.max_tokens * train.update_freq * gpus == tokens, name
        avg = _parse("average", commands.average(name))
        assert avg.num_epoch_checkpoints == average, name
        decode = _parse("translate", commands.translate(name, "test", threads=1))
        assert (decode.beam, decode.lenpen) == (beam, lenpen), name
