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
from pipeline_lib.workflow.rules import ReportRules

REPO = Path(__file__).resolve().parents[2]

# (dropout, attention, activation), lr, warmup, max epochs, averaged checkpoints, beam, lenpen,
# target tokens per update: the recipe shared by every row of a config (En-De, with two recipes:
# tests/workflow/test_paper_recipes_en_de.py)
RECIPES = {
    "config.wmt14_en_fr.yaml": ((0.1, 0.1, 0.1), 7e-4, 8000, 50, 10, 10, 1.0, 458_752),
}
# Rows that follow one script of their own: the En-Fr 60L-12L rows are TC's wmt14_en-fr.md as typed
# (:38-60, :88-110, :149-183): seed 1111, 5000 tokens x 16 GPUs x update-freq 16, eval_wmt_en-fr.sh's
# beam 5 and lenpen 0.8; (seed, tokens per update, beam, lenpen)
TC_60L12L = (1111, 5000 * 16 * 16, 5, 0.8)
ROW_SCRIPTS = {
    name: TC_60L12L
    for name in ("enfr_60L12L_default", "enfr_60L12L_preln", "enfr_60L12L_admin", "enfr_60L12L_admin_bt")
}
# Where the reference eval passes no --max-len-a/b: fairseq-generate's defaults (a 0, b 200)
FAIRSEQ_MAX_LEN = (0.0, 200)
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
            "fp16": (train.amp, train.fp16_scale_window, train.threshold_loss_scale),
        }
        want = {
            "layers": (enc, dec), "d_model": d_model, "residual": residual,
            "dropouts": dropouts, "lr": lr,
            "warmup": warmup, "epochs": epochs, "optimizer": "radam",
            # --fp16 --fp16-scale-window 256 --threshold-loss-scale 0.03125 in every script
            "fp16": ("fairseq_fp16", 256, 0.03125),
        }  # fmt: skip
        assert got == want, name
        seed, row_tokens, row_beam, row_lenpen = ROW_SCRIPTS.get(name, (1, tokens, beam, lenpen))
        assert train.seed == seed, name
        assert effective_batch(plan, name)[0] == gpus, name
        assert effective_batch(plan, name)[3] == row_tokens, name
        assert train.max_tokens * train.update_freq * gpus == row_tokens, name
        avg = _parse("average", commands.average(name))
        assert avg.num_epoch_checkpoints == average, name
        decode = _parse("translate", commands.translate(name, "test", threads=1))
        assert (decode.beam, decode.lenpen) == (row_beam, row_lenpen), name
        assert (decode.max_len_a, decode.max_len_b) == FAIRSEQ_MAX_LEN, name
        if name in ROW_SCRIPTS and residual == "admin":  # profiled as TC :156-167: its own flags, one GPU
            profile = _parse("profile", commands.profile(name))
            assert (profile.max_tokens, profile.dropout, profile.seed) == (5000, 0.1, 1111), name


def test_iwslt14_fig10_config_resolves_to_its_sources_values(monkeypatch):
    """Table 2's IWSLT'14 rows follow TC's recipe (iwslt14_de-en.md:14-108: RAdam 7e-4, warm-up 6000,
    100k updates, fp16, seeds 1111..5555, average of the last 10 epochs); the Figure 10 grid is TC's
    "No Warmup" (:168-245): RAdam, linear schedule, warm-up 1 from 1e-7, lr {1..5}e-4 x beta2
    {0.99, 0.995, 0.999}, seed 1111, each cell averaged, decoded (fairseq's max-len defaults) and scored."""
    monkeypatch.chdir(REPO)
    plan = check([Path("config.iwslt14_fig10.yaml")], REPO)
    commands = Commands(plan)
    rows = {n for n in plan.experiments if not n.startswith("stability-")}
    # one seed group per method (Table 2's mean over runs), expanded into a run per seed
    tc_seeds = (1111, 2222, 3333, 4444, 5555)
    assert rows == {f"iwslt_6L6L_{m}-s{s}" for m in ("postln", "preln", "admin") for s in tc_seeds}
    seeds: dict[str, set[int]] = {}
    grid = set()
    for name in plan.experiments:
        train = _parse("train", commands.train(name, threads=1))
        assert (train.encoder_layers, train.decoder_layers, train.d_model, train.ffn_dim, train.heads) == (
            6, 6, 512, 1024, 4,
        ), name  # fmt: skip
        assert (train.dropout, train.attention_dropout, train.activation_dropout) == (0.3, 0.1, 0.1), name
        assert (train.optimizer, train.weight_decay, train.label_smoothing, train.clip_norm, train.amp) == (
            "radam", 1e-4, 0.1, 0.0, "fairseq_fp16",
        ), name  # fmt: skip
        assert (train.fp16_scale_window, train.threshold_loss_scale) == (256, 0.03125), name
        assert (train.warmup_init_lr, train.max_update, train.max_epoch) == (1e-7, 100_000, 0), name
        assert effective_batch(plan, name)[0] == 1 and train.max_tokens * train.update_freq == 4096, name
        avg = _parse("average", commands.average(name))
        assert avg.num_epoch_checkpoints == 10, name
        decode = _parse("translate", commands.translate(name, "test", threads=1))
        assert (decode.beam, decode.lenpen, decode.max_len_a, decode.max_len_b) == (5, 1.0, 0.0, 200), name
        if name in rows:
            assert (train.lr, train.lr_scheduler, train.warmup_updates, train.adam_betas) == (
                7e-4, "inverse_sqrt", 6000, (0.9, 0.98),
            ), name  # fmt: skip
            seeds.setdefault(train.residual, set()).add(train.seed)
        else:
            assert (train.lr_scheduler, train.warmup_updates, train.seed) == ("linear", 1, 1111), name
            assert train.adam_betas[0] == 0.9 and train.divergence_after == 8000, name
            grid.add((train.residual, train.lr, train.adam_betas[1]))
    assert seeds == {m: {1111, 2222, 3333, 4444, 5555} for m in ("post_ln", "pre_ln", "admin")}
    lrs, betas = (1e-4, 2e-4, 3e-4, 4e-4, 5e-4), (0.99, 0.995, 0.999)
    assert grid == {(m, lr, b) for m in ("post_ln", "pre_ln", "admin") for lr in lrs for b in betas}
    # every cell is decoded and scored, and the map reads each cell's score
    grid_runs = set(plan.stability_runs)
    assert {plan.score_file(n) for n in grid_runs} <= set(plan.all_targets())
    spec_runs = ReportRules(plan).spec()["stability"]["runs"]
    assert {spec_runs[n]["score"] for n in grid_runs} == {plan.score_file(n) for n in grid_runs}


# Wang et al. 2019 / Xu et al. 2020: experiment -> (enc, dec, residual, dlcl_norm, init, lr, warmup, beta2,
# (dropout, attention, activation), max updates, tokens per update, averaged checkpoints and their kind)
WANG_DEEP_PRE = (2e-3, 16000, 0.997, (0.1, 0.1, 0.1), 50_000, 65_536, (5, "epoch"))
WANG_DEEP_POST = (2e-3, 16000, 0.98, (0.1, 0.0, 0.0), 50_000, 65_536, (5, "epoch"))
WANG_BASE_PRE = (1e-3, 8000, 0.997, (0.1, 0.1, 0.1), 100_000, 32_768, (5, "epoch"))
WANG_BASE_POST = (7e-4, 4000, 0.98, (0.1, 0.0, 0.0), 100_000, 32_768, (5, "epoch"))
WANG_BIG_PRE = (7e-4, 8000, 0.997, (0.3, 0.1, 0.1), 300_000, 32_768, (5, "epoch"))  # [Wang] §4.2
WANG_BIG_POST = (5e-4, 4000, 0.98, (0.3, 0.0, 0.0), 300_000, 32_768, (5, "epoch"))
XU = (4.94e-4, 8000, 0.98, (0.1, 0.1, 0.1), 100_000, 25_600, (5, "update"))  # Neutron cnfg/base.py:58-60
DLCL_LIPSCHITZ_ROWS = {
    "wang_post_6L": ((6, 6, "post_ln", "xavier"), WANG_BASE_POST),
    "wang_post_20L": ((20, 6, "post_ln", "xavier"), WANG_DEEP_POST),
    "wang_post_dlcl_6L": ((6, 6, "dlcl:post", "xavier"), WANG_BASE_POST),
    "wang_post_dlcl_25L": ((25, 6, "dlcl:post", "xavier"), WANG_DEEP_POST),
    "wang_pre_6L": ((6, 6, "pre_ln", "xavier"), WANG_BASE_PRE),
    "wang_pre_20L": ((20, 6, "pre_ln", "xavier"), WANG_DEEP_PRE),
    "wang_pre_dlcl_6L": ((6, 6, "dlcl:pre", "xavier"), WANG_BASE_PRE),
    "wang_pre_dlcl_30L": ((30, 6, "dlcl:pre", "xavier"), WANG_DEEP_PRE),
    "wang_post_big": ((6, 6, "post_ln", "xavier"), WANG_BIG_POST),  # Big: d 1024
    "wang_pre_big": ((6, 6, "pre_ln", "xavier"), WANG_BIG_PRE),
    "wang_post_16L": ((16, 6, "post_ln", "xavier"), WANG_DEEP_POST),  # [Wang] Table 2
    "wang_post_dlcl_16L": ((16, 6, "dlcl:post", "xavier"), WANG_DEEP_POST),
    "wang_pre_16L": ((16, 6, "pre_ln", "xavier"), WANG_DEEP_PRE),
    "wang_pre_dlcl_16L": ((16, 6, "dlcl:pre", "xavier"), WANG_DEEP_PRE),
    "wang_pre_6L4L": ((6, 4, "pre_ln", "xavier"), WANG_BASE_PRE),  # [Wang] Table 5
    "wang_pre_6L8L": ((6, 8, "pre_ln", "xavier"), WANG_BASE_PRE),
    **{f"xu_{n}L": ((n, n, "post_ln", "xavier"), XU) for n in (6, 12, 18, 24)},
    **{f"xu_lip_{n}L": ((n, n, "post_ln", "lipschitz"), XU) for n in (6, 12, 18, 24)},
    "xu_lip_24L6L": ((24, 6, "post_ln", "lipschitz"), XU),
    "xu_lip_6L24L": ((6, 24, "post_ln", "lipschitz"), XU),
    **{f"xu_pre_{n}L": ((n, n, "pre_ln", "xavier"), XU) for n in (6, 12, 18, 24)},  # [Xu] v2
    **{f"xu_pre_lip_{n}L": ((n, n, "pre_ln", "lipschitz"), XU) for n in (6, 12, 18, 24)},  # [Xu] v2'
}


def test_dlcl_and_lipschitz_config_resolves_to_each_papers_recipe(monkeypatch):
    monkeypatch.chdir(REPO)
    plan = check([Path("config.wmt14_en_de_dlcl_lipschitz.yaml")], REPO)
    commands = Commands(plan)
    # Wang's rows are a mean of three runs (Wang et al. 2019, Sec. 4.1): a run per seed 1, 2, 3
    runs = {run: row for row in DLCL_LIPSCHITZ_ROWS for run in plan.seed_groups.get(row, [row])}
    assert set(plan.experiments) == set(runs), "a row was added or removed"
    for name, row in runs.items():
        (enc, dec, residual, init), recipe = DLCL_LIPSCHITZ_ROWS[row]
        lr, warmup, beta2, dropouts, updates, tokens, (average, kind) = recipe
        train = _parse("train", commands.train(name, threads=1))
        assert name == row or name == f"{row}-s{train.seed}" and train.seed in (1, 2, 3), name
        got_residual = f"dlcl:{train.dlcl_norm}" if train.residual == "dlcl" else train.residual
        assert (train.encoder_layers, train.decoder_layers, got_residual, train.init) == (
            enc,
            dec,
            residual,
            init,
        )
        assert (train.lr, train.warmup_updates, train.adam_betas, train.optimizer) == (
            lr, warmup, (0.9, beta2), "adam",
        ), name  # fmt: skip
        assert (train.dropout, train.attention_dropout, train.activation_dropout) == dropouts, name
        assert (train.max_update, train.max_epoch) == (updates, 0), name
        assert effective_batch(plan, name)[3] == tokens, name
        avg = _parse("average", commands.average(name))
        got_average = avg.num_epoch_checkpoints if kind == "epoch" else avg.num_update_checkpoints
        assert got_average == average, name
        decode = _parse("translate", commands.translate(name, "test", threads=1))
        # Wang: dlcl generate.py, beam 4, lenpen 0.6, fairseq's max-len defaults; Xu: Neutron's
        # beam 4, length_penalty 0.0, src_len + 64 (cnfg/base.py:72-73, transformer/NMT.py:66)
        want = (4, 0.0, 1.0, 64) if name.startswith("xu_") else (4, 0.6, *FAIRSEQ_MAX_LEN)
        assert (decode.beam, decode.lenpen, decode.max_len_a, decode.max_len_b) == want, name
