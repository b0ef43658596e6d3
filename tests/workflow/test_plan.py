"""pipeline_lib.workflow as plain Python: schema validation, the stability grid, cross-references,
recipes, priorities, significance sets, the report spec and the quoted command lines."""

from __future__ import annotations

import copy
import dataclasses
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow import Commands, Plan
from pipeline_lib.workflow.flags import flag, flags
from pipeline_lib.workflow.plan import regex
from pipeline_lib.workflow.rules import EvaluateRules, ReportRules
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema(REPO / SCHEMA_FILE)
DEMO = yaml.safe_load((REPO / "config.yaml").read_text())


def plan_of(config: dict) -> Plan:
    config = copy.deepcopy(config)
    validate_config(config, SCHEMA)
    return Plan(config)


@pytest.fixture(scope="module")
def demo() -> Plan:
    return plan_of(DEMO)


def test_schema_rejects_a_depth_with_zero_layers():
    bad = copy.deepcopy(DEMO)
    bad["stability_map"]["depths"] = ["6-6", "6-0"]
    with pytest.raises(ConfigError, match=r"config key 'stability_map\.depths\.1'"):
        validate_config(bad, SCHEMA)


def test_schema_names_an_unknown_key_and_fills_defaults():
    bad = copy.deepcopy(DEMO)
    bad["recipes"]["demo"]["lerning_rate"] = 1
    with pytest.raises(ConfigError, match=r"config key 'recipes\.demo\.lerning_rate'"):
        validate_config(bad, SCHEMA)
    cfg = copy.deepcopy(DEMO)
    del cfg["evaluation"]
    validate_config(cfg, SCHEMA)
    assert cfg["evaluation"] == {
        "split": "test", "decoding": "default", "bootstrap_samples": 1000, "bootstrap_seed": 12345, "alpha": 0.05,
        "translation_floor": 1.0, "paper_tolerance": 0.5,
    }  # fmt: skip
    assert "compound_split" not in cfg["datasets"]["bible_enfr"]  # a table's metric chooses it now


def test_stability_grid_expands_method_depth_lr_beta2_seed(demo: Plan):
    spec = DEMO["stability_map"]
    seeds, betas = spec.get("seeds", [1]), spec.get("betas2", [None])
    expected = len(spec["methods"]) * len(spec["lrs"]) * len(spec["depths"]) * len(betas) * len(seeds)
    assert len(demo.stability_runs) == expected
    lr, beta2, seed = spec["lrs"][-1], betas[-1], seeds[-1]
    name = f"stability-admin-6L6L-lr{lr:g}-b{beta2:g}-s{seed}"
    run = demo.experiments[name]
    assert (run["encoder_layers"], run["decoder_layers"], run["residual"], run["seed"]) == (
        6,
        6,
        "admin",
        seed,
    )
    recipe = demo.recipe(name)
    assert recipe["lr"] == lr and recipe["adam_betas"][1] == beta2
    assert recipe["max_update"] == spec["max_update"]
    assert recipe["warmup_updates"] == spec.get("warmup_updates", recipe["warmup_updates"]) == 0
    setup = ReportRules(demo).stability_setup()
    assert "no warm-up" in setup["setup"] and "stuck" in setup["rule"]["text"]


def test_a_listed_experiment_may_not_shadow_a_stability_run():
    cfg = copy.deepcopy(DEMO)
    cfg["experiments"][next(iter(plan_of(cfg).stability_runs))] = cfg["experiments"]["demo_6L6L_admin"]
    with pytest.raises(ConfigError, match="clashes with a generated stability_map run"):
        plan_of(cfg)


@pytest.mark.parametrize("mutate,key", [
    (lambda c: c["experiments"]["demo_6L6L_admin"].update(dataset="nope"), "experiments.demo_6L6L_admin.dataset"),
    (lambda c: c["experiments"]["demo_6L6L_admin"].update(recipe="nope"), "experiments.demo_6L6L_admin.recipe"),
    (lambda c: c["tables"]["table1"]["rows"].append("ghost"), "tables.table1.rows"),
    (lambda c: c["tables"]["comparisons"][1].update(baseline="ghost"), r"tables.comparisons\[1\].baseline"),
    (lambda c: c["evaluation"].update(decoding="ghost"), "evaluation.decoding"),
    (lambda c: c["recipes"]["demo"].update(keep_interval_updates=1), "recipes.demo.keep_interval_updates"),
    (lambda c: c["datasets"]["bible_enfr"].update(tgt="en"), "datasets.bible_enfr.tgt"),
    (lambda c: c["stability_map"].update(width="nope"), "stability_map.width"),
    (lambda c: c["widths"]["d64"].update(heads=3), "widths.d64.heads"),
    (lambda c: c["widths"].update(odd={"arch": "base", "d_model": 100}), "widths.odd.d_model"),
])  # fmt: skip
def test_cross_references_name_the_key(mutate, key):
    cfg = copy.deepcopy(DEMO)
    mutate(cfg)
    with pytest.raises(ConfigError, match=rf"config key '{key}'"):
        plan_of(cfg)


def test_back_translation_needs_a_reverse_model_on_the_same_dataset():
    cfg = yaml.safe_load((REPO / "config.demo_bt.yaml").read_text())
    plan_of(cfg)  # as shipped: valid
    bt = next(iter(cfg["backtranslation"]))
    cfg["experiments"][cfg["backtranslation"][bt]["reverse_model"]]["direction"] = "forward"
    with pytest.raises(ConfigError, match=rf"backtranslation\.{bt}\.reverse_model"):
        plan_of(cfg)


def test_recipe_overrides_and_priorities(demo: Plan):
    assert demo.recipe("demo_6L6L_admin")["lr"] == DEMO["recipes"]["demo"]["lr"]
    cfg = copy.deepcopy(DEMO)
    cfg["experiments"]["demo_6L6L_admin"]["overrides"] = {"lr": 0.01}
    assert plan_of(cfg).recipe("demo_6L6L_admin")["lr"] == 0.01
    # updates x layers x d^2: the 1,400-update d256 model first, then the 12L models, then 6L.
    wide, deep, shallow = (
        demo.train_priority(n) for n in ("demo_2L2L_preln_wide", "demo_12L6L_admin", "demo_6L6L_admin")
    )
    assert wide > deep > shallow
    assert deep == 1 + 500 * 18 * 64**2 // 10**6


def test_significance_sets_and_report_spec(demo: Plan):
    assert set(demo.significance) == {"table1", "residual", "best", "table3"}
    base, systems, matrix = demo.significance["residual"]
    assert base == "demo_6L6L_postln" and "demo_6L6L_postln" not in systems and not matrix
    assert demo.significance["table3"][2] is True
    spec = ReportRules(demo).spec()
    assert set(spec["experiments"]) == set(demo.table_experiments())
    info = spec["experiments"]["demo_2L2L_preln_wide"]
    assert info["score"] == "results/experiments/demo_2L2L_preln_wide/test.score.json"
    assert info["width"] == "256D" and info["lr"] == 0.002
    assert len(spec["stability"]["runs"]) == len(demo.stability_runs)
    cfg = copy.deepcopy(DEMO)
    cfg["results"] = "out/enfr"
    assert ReportRules(plan_of(cfg)).spec()["tables_path"] == "out/enfr/tables.md"  # the header's rerun hint
    assert "results/plots/stability_map.png" in demo.all_targets()


def test_profiled_experiments_are_the_admin_ones(demo: Plan):
    admin = {n for n, e in demo.experiments.items() if e["residual"] == "admin"}
    assert set(demo.profiled_names()) == admin and admin


def test_flags_drop_none_and_false_and_repeat_lists():
    assert flag("beam", None) == [] and flag("dedup", False) == [] and flag("dedup", True) == ["--dedup"]
    assert flag("splits", ["train", "valid"]) == ["--splits", "train", "valid"]
    assert flag("lr", 0.002) == ["--lr", "0.002"]


def test_train_command_carries_the_recipe(demo: Plan):
    words = shlex.split(Commands(demo).train("demo_12L6L_admin", threads=2))
    args = dict(zip(words[::2], words[1::2], strict=False))
    assert words.count("--lr") == 1 and args["--lr"] == str(DEMO["recipes"]["demo"]["lr"])
    assert args["--encoder-layers"] == "12" and args["--residual"] == "admin"
    assert args["--adam-betas"] == "(0.9, 0.98)" and args["--num-threads"] == "2"
    assert args["--admin-profile"] == "work/experiments/demo_12L6L_admin/admin_profile.json"
    assert "--admin-profile" not in shlex.split(Commands(demo).train("demo_12L6L_preln", threads=2))


HOSTILE = "w;touch INJECTED;#$(touch INJECTED)`touch INJECTED` 'q\"\n"


def test_hostile_config_values_stay_single_words(tmp_path: Path):
    """Every path and name goes through shlex.quote: a real shell gives back the exact words and
    runs nothing of them."""
    cfg = copy.deepcopy(DEMO)
    cfg["workdir"] = HOSTILE
    cfg["results"] = HOSTILE + "r"
    cmd = Commands(plan_of(cfg))
    name, ds = "demo_6L6L_admin", "bible_enfr"
    lines = [
        cmd.prepare_demo(ds), cmd.preprocess(ds, 2), cmd.learn_bpe(ds, 2), cmd.apply_bpe(ds, 2), cmd.binarize(ds, 2),
        cmd.profile(name), cmd.train(name, 1), cmd.average(name), cmd.translate(name, "test", 1),
        cmd.score(name, "test"), cmd.significance("table3"), cmd.analyze(HOSTILE),
    ]  # fmt: skip
    for line in lines:
        shell = subprocess.run(
            ["bash", "-c", "printf '%s\\0' " + line], cwd=tmp_path, capture_output=True, check=True
        )
        words = shell.stdout.decode().split("\0")[:-1]
        assert words == shlex.split(line)
        assert any(HOSTILE in w for w in words), line
    assert not (tmp_path / "INJECTED").exists()


def test_wildcard_regex_matches_exactly_the_names():
    import re

    pattern = regex(["a.b", "c"])
    assert re.fullmatch(pattern, "a.b") and not re.fullmatch(pattern, "axb") and re.fullmatch(pattern, "c")
    assert not re.fullmatch(regex([]), "")


def test_schema_recipe_keys_are_the_dataclass_settings():
    """One source of truth: a recipe key is a TrainConfig/ModelConfig field marked `recipe`, or one the
    workflow reads itself; a new hyperparameter is a dataclass field (its schema entry is generated)."""
    from pipeline_lib.model.config import ModelConfig, model_recipe_fields
    from pipeline_lib.train.config import recipe_fields
    from pipeline_lib.workflow.argv import WORKFLOW_RECIPE_KEYS

    recipe_props = set(SCHEMA["definitions"]["recipe"]["properties"])
    assert recipe_props == set(recipe_fields()) | set(model_recipe_fields()) | set(WORKFLOW_RECIPE_KEYS)
    model_fields = {f.name for f in dataclasses.fields(ModelConfig)}
    width_props = set(SCHEMA["properties"]["widths"]["additionalProperties"]["properties"]) - {
        "arch",
        "label",
    }
    assert width_props <= model_fields
    experiment_props = SCHEMA["properties"]["experiments"]["additionalProperties"]["properties"]
    assert {"encoder_layers", "decoder_layers", "residual", "dlcl_norm", "init"} <= set(
        experiment_props
    ) & model_fields


def test_every_recipe_setting_reaches_the_train_command(demo: Plan):
    """The train argv parses back, through the real train parser, to the recipe's values."""
    import argparse

    from pipeline_lib.train.cli import add_arguments, train_config_from_args

    cfg = copy.deepcopy(DEMO)
    cfg["recipes"]["demo"].update(max_sentences=77, adam_eps=1e-6, keep_last_epochs=3, amp="bf16")
    plan = plan_of(cfg)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(shlex.split(Commands(plan).train("demo_6L6L_admin", threads=1)))
    train = train_config_from_args(args)
    recipe = plan.recipe("demo_6L6L_admin")
    for key, value in recipe.items():
        if hasattr(train, key):
            want = tuple(value) if isinstance(value, list) else value
            assert getattr(train, key) == want, key
    from pipeline_lib.model.cli_args import model_config_from_args

    model = model_config_from_args(args, 100, 100)
    width = DEMO["widths"]["d64"]
    assert (model.d_model, model.ffn_dim, model.heads) == (width["d_model"], width["ffn_dim"], width["heads"])
    assert (model.encoder_layers, model.residual, model.dropout) == (6, "admin", recipe["dropout"])


def test_every_decoding_key_is_a_translate_flag():
    """The schema's decoding keys parse through the real translate parser into the same values."""
    import argparse

    from pipeline_lib.decode.cli import _search_config, add_arguments

    props = SCHEMA["properties"]["decoding"]["additionalProperties"]["properties"]
    sample = {"beam": 3, "lenpen": 0.6, "max_len_a": 1.2, "max_len_b": 7, "max_tokens": 123, "sampling": True,
              "sampling_topk": 10, "temperature": 0.7, "seed": 9}  # fmt: skip
    assert set(sample) == set(props), "update this test's sample with the new schema key"
    cfg = copy.deepcopy(DEMO)
    cfg["decoding"]["all"] = sample
    words = shlex.split(flags(Commands(plan_of(cfg)).decoding("all")))
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--checkpoint", "c.pt", "--input", "x", "--output", "y", *words])
    for key, value in sample.items():
        assert getattr(args, key) == value, key
    assert _search_config(args).sampling_topk == 10


ENFR = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text())
SMOKE = yaml.safe_load((REPO / "config.smoke.yaml").read_text())


def test_smoke_shrinks_sizes_and_keeps_the_dag():
    plan = plan_of({**ENFR, **SMOKE})
    real = plan_of(ENFR)
    assert plan.workdir == "work/smoke" and plan.results == "results/wmt14_en_fr/smoke"
    assert set(plan.experiments) == set(real.experiments)
    for name, exp in plan.experiments.items():
        assert (exp["encoder_layers"], exp["decoder_layers"]) == (
            real.experiments[name]["encoder_layers"],
            real.experiments[name]["decoder_layers"],
        )
        assert plan.width(name)["d_model"] == SMOKE["smoke"]["d_model"]
        rec = plan.recipe(name)
        assert rec["max_epoch"] == 2 and rec["update_freq"] == 1 and rec["warmup_updates"] == 10
        assert rec["average_last"] == 2 and rec["amp"] == real.recipe(name)["amp"]  # gpu: true keeps AMP
    assert plan.resources("enfr_60L12L_admin", "train")["gpu"] == 16  # GPU shape kept for the cluster
    ds = plan.datasets["wmt14_en_fr"]
    assert ds["mono"]["max_lines"] == 2000 and ds["subword"]["merges"] == 1000
    assert ds["preprocess"]["max_train_lines"] == 20000
    assert ENFR["widths"]["base"] == {"arch": "base"}  # the loaded config itself is untouched
    cpu = plan_of({**ENFR, "smoke": {**SMOKE["smoke"], "gpu": False}})
    assert cpu.resources("enfr_60L12L_admin", "train") == {"gpu": 0, "runtime": 10080, "mem_mb": 256000}
    assert cpu.recipe("enfr_6L6L_admin")["amp"] == "none"
    assert "--max-train-lines 20000" in Commands(cpu).preprocess("wmt14_en_fr", 1)


def test_smoke_shrinks_the_stability_maps_updates():
    """Figure 10's grid counts updates (100k a run), not epochs: smoke caps each map run at map_updates."""
    fig10 = yaml.safe_load((REPO / "config.iwslt14_fig10.yaml").read_text())
    real = plan_of(fig10)
    plan = plan_of({**fig10, **SMOKE})
    assert set(plan.stability_runs) == set(real.stability_runs) and plan.stability_runs
    for name in plan.stability_runs:
        assert real.recipe(name)["max_update"] == 100000
        assert plan.recipe(name)["max_update"] == SMOKE["smoke"]["map_updates"]
    assert fig10["stability_map"]["max_update"] == 100000  # the loaded config itself is untouched


def test_news_crawl_recipe_is_a_download_job_and_checked_against_the_dataset():
    plan = plan_of(ENFR)
    assert plan.mono_dataset_names("download") == ["wmt14_en_fr"] and plan.mono_dataset_names("copy") == []
    args = shlex.split(Commands(plan).download_mono("wmt14_en_fr"))
    assert args[:2] == ["--mono-recipe", "news-crawl-fr"] and "--max-lines" in args
    wrong = copy.deepcopy(ENFR)
    wrong["datasets"]["wmt14_en_fr"]["mono"] = {"recipe": "news-crawl-de"}
    with pytest.raises(ConfigError, match=r"datasets\.wmt14_en_fr\.mono\.recipe.*target is fr"):
        plan_of(wrong)
    local = copy.deepcopy(DEMO)
    ds = next(iter(local["datasets"].values()))
    ds.update(source="local", path="x", mono={"recipe": "news-crawl-fr"})
    with pytest.raises(ConfigError, match=r"mono.*local dataset"):
        plan_of(local)


def test_mirror_reaches_every_download_command():
    cfg = {**ENFR, "download": {"mirror": "http://127.0.0.1:8/m", "checksums": "/x/SHA256SUMS"}}
    cmd = Commands(plan_of(cfg))
    for line in (cmd.download("wmt14_en_fr"), cmd.download_mono("wmt14_en_fr")):
        assert "--mirror http://127.0.0.1:8/m --checksums /x/SHA256SUMS" in line
    bad = {**ENFR, "download": {"mirror": "ftp://x"}}
    with pytest.raises(ConfigError, match=r"download\.mirror"):
        plan_of(bad)


def test_tables_name_their_significance_metric():
    plan = plan_of(ENFR)
    assert EvaluateRules(plan).significance_metric("table1") == "tok_bleu"
    assert EvaluateRules(plan).significance_metric("table3") == "tok_bleu"
    assert EvaluateRules(plan).significance_metric("backtranslation") == "tok_bleu"
    unset = copy.deepcopy(ENFR)
    next(c for c in unset["tables"]["comparisons"] if c["name"] == "backtranslation").pop("metric")
    assert (
        EvaluateRules(plan_of(unset)).significance_metric("backtranslation") == "bleu"
    )  # the schema default
    args = Commands(plan).significance("table3")
    # fairseq-generate's BLEU4 reads the generate files, not a re-tokenized hypothesis
    assert "--metrics tok_bleu" in args and "--moses-lang" not in args
    assert "--generate enfr_6L6L_admin=results/wmt14_en_fr/experiments/enfr_6L6L_admin/test.generate" in args


def test_the_reverse_model_trains_before_the_runs_that_wait_for_it():
    plan = plan_of(ENFR)
    rev = plan.train_priority("fren_6L6L_big_rev")
    for name in ("enfr_60L12L_admin_bt", "enfr_36L12L_768_admin_bt"):
        assert rev > plan.train_priority(name)
    assert plan.train_priority("enfr_6L6L_admin") < plan.train_priority("enfr_60L12L_admin")


def test_logs_live_with_their_configs_results_unless_configured(tmp_path: Path):
    assert plan_of(DEMO).logs == "results/logs"
    assert plan_of(ENFR).logs == "results/wmt14_en_fr/logs"
    assert plan_of({**ENFR, **SMOKE}).logs == "results/wmt14_en_fr/smoke/logs"
    assert plan_of({**ENFR, "logs": "/scratch/me/logs"}).logs == "/scratch/me/logs"
    assert plan_of({**ENFR, **SMOKE, "logs": "/scratch/me/logs"}).logs == "/scratch/me/logs/smoke"
    # the rules write there: a dry run's job logs
    cfg = tmp_path / "logs.yaml"
    cfg.write_text(yaml.safe_dump({**DEMO, "logs": "elsewhere/logs"}))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "-n", "-s", str(REPO / "Snakefile"), "--directory",
         str(tmp_path), "all", "--configfile", str(cfg)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    logs = re.findall(r"^\s+log: (\S+)", proc.stdout, re.M)
    assert logs and all(path.startswith("elsewhere/logs/") for path in logs), logs[:5]
