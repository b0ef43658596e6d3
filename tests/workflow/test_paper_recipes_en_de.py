"""config.wmt14_en_de.yaml's resolved commands against its two sources (a drift guard).

The Very Deep paper's rows follow its footnote 8; the Admin paper's Table 2 rows follow
Transformer-Clinic's ``nmt-experiments/wmt14_en-de.md`` as typed (@70f72b7); both read one dataset
prepared as TC's ``pre-process/wmt14en-de.sh``. The expected values are written out here from those
sources (the config's comments give file:line); the commands come from the workflow's own code and
are parsed back by the stages' own parsers.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest

from pipeline_lib.cli import build_parser
from pipeline_lib.data.recipes import RECIPES as DATA_RECIPES
from pipeline_lib.errors import ConfigError
from pipeline_lib.report.labels import layout_label
from pipeline_lib.workflow import Commands
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.cli_plan import effective_batch
from pipeline_lib.workflow.crossref import check_references
from pipeline_lib.workflow.rules import ReportRules

REPO = Path(__file__).resolve().parents[2]
CONFIG = "config.wmt14_en_de.yaml"

# warm-up, max tokens per GPU, GPUs, update_freq, max epochs, seed
VD = {"warmup": 4000, "epochs": 50}  # [VD] footnote 8
TC = {"warmup": 8000, "epochs": 100, "tokens": 8192, "gpus": 4, "update_freq": 1, "seed": 1111}
# experiment: (encoder layers, decoder layers, residual, recipe, GPUs)
ROWS = {
    "ende_6L6L_default": (6, 6, "post_ln", "vd", 4),
    "ende_6L6L_admin": (6, 6, "admin", "vd", 4),
    "ende_60L12L_default": (60, 12, "post_ln", "vd", 16),
    "ende_60L12L_admin": (60, 12, "admin", "vd", 16),
    "ende_60L12L_preln": (60, 12, "pre_ln", "vd", 16),
    **{
        f"t2_ende_{n}L{n}L_{tag}": (n, n, residual, "tc", 4)
        for n in (6, 12, 18)
        for tag, residual in (("default", "post_ln"), ("preln", "pre_ln"), ("admin", "admin"))
    },
    "t1_ende_18L18L_hybrid": (18, 18, "post_ln/pre_ln", "tc", 4),  # [Admin] Table 1
    "ende_18L18L_admin": (18, 18, "admin", "vd", 16),
    "ende_18L18L_deepnorm": (18, 18, "deepnorm", "vd", 16),
    "ende_50L50L_admin": (50, 50, "admin", "vd", 16),
    "ende_50L50L_deepnorm": (50, 50, "deepnorm", "vd", 16),
}


def _parse(stage: str, argv: str):
    return build_parser(stage).parse_args([stage, *shlex.split(argv)])


def test_every_en_de_row_resolves_to_its_papers_recipe(monkeypatch):
    monkeypatch.chdir(REPO)
    plan = check([Path(CONFIG)], REPO)
    commands = Commands(plan)
    assert set(plan.experiments) == set(ROWS), "a row was added or removed: update ROWS"
    for name, (enc, dec, residual, recipe, gpus) in ROWS.items():
        train = _parse("train", commands.train(name, threads=1))
        # shared by both: TC wmt14_en-de.md:70-80 (and [VD] fn 8's lr 1e-3)
        layout = train.residual + (f"/{train.decoder_residual}" if train.decoder_residual else "")
        assert (train.encoder_layers, train.decoder_layers, layout) == (enc, dec, residual), name
        assert (train.optimizer, train.adam_betas, train.lr, train.warmup_init_lr) == (
            "radam", (0.9, 0.98), 1e-3, 1e-7,
        ), name  # fmt: skip
        assert (train.dropout, train.attention_dropout, train.activation_dropout) == (0.1, 0.1, 0.1), name
        assert (train.label_smoothing, train.clip_norm, train.weight_decay, train.amp) == (
            0.1,
            0,
            0,
            "fairseq_fp16",
        )
        assert (train.fp16_scale_window, train.threshold_loss_scale) == (256, 0.03125), name
        gpus_got, _, _, tokens = effective_batch(plan, name)
        assert gpus_got == gpus, name
        if recipe == "tc":
            assert (train.warmup_updates, train.max_epoch, train.seed) == (
                TC["warmup"], TC["epochs"], TC["seed"],
            ), name  # fmt: skip
            assert (train.max_tokens, train.update_freq, tokens) == (8192, 1, 8192 * 4), name
        else:
            assert (train.warmup_updates, train.max_epoch) == (VD["warmup"], VD["epochs"]), name
            assert train.max_tokens == 3584 and tokens == 114_688, name
        if residual == "admin":  # one batch of 8k tokens: [VD] fn 5, TC :124-137
            assert _parse("profile", commands.profile(name)).max_tokens == 8192, name
        assert _parse("average", commands.average(name)).num_epoch_checkpoints == 10, name
        decode = _parse("translate", commands.translate(name, "test", threads=1))
        # eval_wmt_en-de.sh:16-19: --beam 4 --lenpen 0.6, fairseq's max-len defaults (a 0, b 200)
        assert (decode.beam, decode.lenpen, decode.max_len_a, decode.max_len_b) == (4, 0.6, 0.0, 200), name


def test_en_de_data_is_prepared_as_transformer_clinic_does(monkeypatch):
    """pre-process/wmt14en-de.sh: europarl-v7 + commoncrawl + news-commentary-v12 (:18-36), cleaned
    1-80 tokens at clean-corpus-n's default ratio 9 before BPE, train only (:103), valid =
    newstest2013 tokenized like train (:105-113), joint BPE with 32,764 merges (:16)."""
    monkeypatch.chdir(REPO)
    plan = check([Path(CONFIG)], REPO)
    commands = Commands(plan)
    (ds,) = plan.datasets
    recipe = DATA_RECIPES[plan.datasets[ds]["recipe"]]
    assert recipe.corpora == (
        "training/europarl-v7.de-en",
        "commoncrawl.de-en",
        "training/news-commentary-v12.de-en",
    )
    assert any(
        a.url.endswith("/wmt17/translation-task/training-parallel-nc-v12.tgz") for a in recipe.archives
    )
    assert recipe.dev == ("wmt13", "en-de")
    pre = _parse("preprocess", commands.preprocess(ds, 1))
    assert (pre.ratio, pre.min_len, pre.max_len, pre.clean_splits) == (9.0, 1, 80, ["train"])
    assert pre.aggressive and pre.normalize and pre.valid_every == 0
    assert _parse("learn-bpe", commands.learn_bpe(ds, 1)).merges == 32764


def test_admin_table_1s_hybrid_is_labelled_by_both_layouts_and_refused_under_admin(monkeypatch):
    monkeypatch.chdir(REPO)
    plan = check([Path(CONFIG)], REPO)
    info = ReportRules(plan).experiment_info("t1_ende_18L18L_hybrid")
    assert layout_label(info) == "Post-LN enc., Pre-LN dec."
    assert "decoder_residual" not in ReportRules(plan).experiment_info(
        "t2_ende_18L18L_preln"
    )  # others' specs unchanged
    cfg = copy.deepcopy(plan.config)
    cfg["experiments"]["t1_ende_18L18L_hybrid"]["residual"] = "admin"
    with pytest.raises(ConfigError, match=r"'experiments.t1_ende_18L18L_hybrid.decoder_residual'"):
        check_references(cfg, cfg["experiments"])
