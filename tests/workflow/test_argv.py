"""pipeline_lib/workflow/argv.py: the argv each rule hands its stage.

A value the config leaves out must leave the flag out (the stage's default applies), a 0 must stay a
0, a switch the config turns off must stay off, and a list keeps every item. Every command of every
shipped config is parsed by the real parser of the stage it feeds (`python -m pipeline_lib <stage>`),
and the parsed values are compared with the config: a flag renamed on one side, or a value lost on
the way, fails here rather than in a cluster job.
"""

from __future__ import annotations

import copy
import shlex
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline_lib.cli import build_parser
from pipeline_lib.workflow import Commands, Plan
from pipeline_lib.workflow.flags import flag, flags
from pipeline_lib.workflow.rules import BacktranslationRules
from pipeline_lib.workflow.rules.train import recipe_pairs, recipe_value
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = load_schema(REPO / SCHEMA_FILE)
# Full configs (the ones with experiments; config.smoke.yaml and config.gpu_demo_24gb.yaml are overlays).
CONFIGS = sorted(p.name for p in REPO.glob("config*.yaml") if "experiments" in yaml.safe_load(p.read_text()))


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / name).read_text())


def plan_of(config: dict[str, Any]) -> Plan:
    config = copy.deepcopy(config)
    validate_config(config, SCHEMA)
    return Plan(config)


def parse(stage: str, args: str) -> Namespace:
    """The words a rule's shell line gives `python -m pipeline_lib <stage>`, through that stage's parser."""
    return build_parser(stage).parse_args([stage, *shlex.split(args)])


# -------------------------------------------------------------------------------------- flag / flags


def test_absent_values_drop_the_flag_and_falsy_values_stay():
    assert flag("beam", None) == [] and flag("dedup", False) == [] and flag("splits", []) == []
    # 0, 0.0 and "" are values, not "unset" (valid-every 0, a seed of 0, lenpen 0.0)
    assert flag("seed", 0) == ["--seed", "0"] and flag("lenpen", 0.0) == ["--lenpen", "0.0"]
    assert flag("tag", "") == ["--tag", ""]


def test_a_switch_is_bare_and_a_list_repeats_its_items():
    assert flag("dedup", True) == ["--dedup"]
    assert flag("splits", ["train", "valid"]) == ["--splits", "train", "valid"]
    assert flag("splits", ("test",)) == ["--splits", "test"]


def test_flags_quote_each_word_so_the_shell_gives_it_back_whole():
    line = flags([("out-dir", "my data/x;y"), ("dedup", True), ("seed", None), ("splits", ["a b", "c"])])
    assert shlex.split(line) == ["--out-dir", "my data/x;y", "--dedup", "--splits", "a b", "c"]


def test_recipe_pairs_keep_only_set_fields_in_field_order_as_flags():
    recipe = {"adam_betas": [0.9, 0.98], "lr": 0.001, "unrelated": 1}
    assert recipe_pairs(recipe, ["lr", "max_tokens", "adam_betas"]) == [
        ("lr", 0.001),
        ("adam-betas", "(0.9, 0.98)"),
    ]
    assert recipe_value((0.9, 0.999)) == "(0.9, 0.999)" and recipe_value(3) == 3


# -------------------------------------------------------------------- every command, real parsers


def commands(plan: Plan) -> list[tuple[str, str, Callable[[], str]]]:
    """(stage, what, build) for every command the rules would run for this plan."""
    cmd = Commands(plan)
    out: list[tuple[str, str, Callable[[], str]]] = []
    for ds in plan.dataset_names("demo"):
        out.append(("prepare-demo", ds, lambda ds=ds: cmd.prepare_demo(ds)))
    for ds in plan.dataset_names("ding"):
        out.append(("prepare-ding", ds, lambda ds=ds: cmd.prepare_ding(ds)))
    for ds in plan.dataset_names("download"):
        out.append(("download", ds, lambda ds=ds: cmd.download(ds)))
    for ds in plan.mono_dataset_names("download"):
        out.append(("download", f"{ds} mono", lambda ds=ds: cmd.download_mono(ds)))
    for ds in plan.datasets:
        out += [
            ("preprocess", ds, lambda ds=ds: cmd.preprocess(ds, 2)),
            ("preprocess", f"{ds} test", lambda ds=ds: cmd.preprocess(ds, 2, test=True)),
            ("learn-bpe", ds, lambda ds=ds: cmd.learn_bpe(ds, 2)),
            ("apply-bpe", ds, lambda ds=ds: cmd.apply_bpe(ds, 2)),
            ("apply-bpe", f"{ds} test", lambda ds=ds: cmd.apply_bpe(ds, 2, test=True)),
        ]
    for ds in [*plan.datasets, *(f"bt-{bt}" for bt in plan.backtranslation)]:
        out += [
            ("binarize", ds, lambda ds=ds: cmd.binarize(ds, 2)),
            ("binarize", f"{ds} test", lambda ds=ds: cmd.binarize_test(ds, 2)),
        ]
    for name in plan.experiments:
        out += [
            ("train", name, lambda n=name: cmd.train(n, 2)),
            ("average", name, lambda n=name: cmd.average(n)),
            ("translate", name, lambda n=name: cmd.translate(n, plan.split, 2)),
            ("score", name, lambda n=name: cmd.score(n, plan.split)),
        ]
    for name in plan.profiled_names():
        out.append(("profile", name, lambda n=name: cmd.profile(n)))
    for bt, spec in plan.backtranslation.items():
        out.append(("bt-mix", bt, lambda bt=bt: cmd.bt_mix(bt)))
        for shard in range(spec["shards"]):
            out.append(
                ("translate", f"{bt} shard {shard}", lambda bt=bt, s=shard: cmd.backtranslate(bt, s, 2))
            )
    for table in plan.significance:
        out.append(("significance", table, lambda t=table: cmd.significance(t)))
    if plan.analysis_systems():
        out.append(("analyze", "analysis", cmd.analyze))
    return out


@pytest.mark.parametrize("config", CONFIGS)
def test_every_command_of_every_config_parses_with_its_stages_parser(config: str, capsys):
    plan = plan_of(load(config))
    built = commands(plan)
    # no report: its rules write the spec as a file (pipeline_lib/report/spec_file.py)
    assert {stage for stage, _, _ in built} >= {"preprocess", "train", "translate", "score"}
    for stage, what, build in built:
        try:
            parse(stage, build())
        except SystemExit:
            pytest.fail(f"{config}: {stage} ({what}) refuses its argv: {capsys.readouterr().err.strip()}")


# ----------------------------------------------------------------- values, as the stage reads them

DEMO = load("config.yaml")
ENFR = load("config.wmt14_en_fr.yaml")


def _other_value(spec: dict[str, Any], default: Any) -> Any:
    """A valid value of a generated schema property that differs from the stage's default."""
    if "enum" in spec:
        return next(v for v in reversed(spec["enum"]) if v != default)
    if spec.get("type") == "array":
        return spec["items"]["enum"][:1]
    if spec.get("type") == "boolean":
        return not default
    return 7 if spec.get("type") == "integer" else spec.get("maximum", spec.get("exclusiveMaximum", 5)) / 2


def _data_stage_settings() -> list[tuple[str, type, str, Callable[[Commands, str], str]]]:
    from pipeline_lib.data.apply_subword import ApplySettings
    from pipeline_lib.data.binarize import BinarizeSettings
    from pipeline_lib.data.learn_subword import LearnSettings
    from pipeline_lib.data.preprocess import PreprocessSettings

    return [
        ("preprocess", PreprocessSettings, "preprocess", lambda c, ds: c.preprocess(ds, 1)),
        ("subword", LearnSettings, "learn-bpe", lambda c, ds: c.learn_bpe(ds, 1)),
        ("subword", ApplySettings, "apply-bpe", lambda c, ds: c.apply_bpe(ds, 1)),
        ("binarize", BinarizeSettings, "binarize", lambda c, ds: c.binarize(ds, 1)),
    ]


@pytest.mark.parametrize(
    "block, cls, stage, command", _data_stage_settings(), ids=lambda v: getattr(v, "__name__", None)
)
def test_every_data_stage_key_of_the_schema_reaches_the_stage_settings(block, cls, stage, command):
    # each key of the dataset's block that the schema accepts (generated from the settings' fields)
    # is set to a non-default value and must arrive in the settings the stage builds from the argv
    import dataclasses

    from pipeline_lib.dataclass_cli import dataclass_from_args

    keys = SCHEMA["properties"]["datasets"]["additionalProperties"]["properties"][block]["properties"]
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    own = [key for key in keys if key in defaults]
    assert own, f"no {block} key is a field of {cls.__name__}"
    for key in own:
        cfg = copy.deepcopy(DEMO)
        ds = next(iter(cfg["datasets"]))
        value = _other_value(keys[key], defaults[key])
        cfg["datasets"][ds][block] = {key: value}
        settings = dataclass_from_args(cls, parse(stage, command(Commands(plan_of(cfg)), ds)))
        expected = tuple(value) if isinstance(value, list) else value
        assert getattr(settings, key) == expected != defaults[key], key


def _first_profiled_recipe(cfg: dict[str, Any]) -> dict[str, Any]:
    plan = plan_of(cfg)
    return cfg["recipes"][plan.experiments[plan.profiled_names()[0]]["recipe"]]


def _renamed_key_stages() -> list[tuple[str, type, str, Callable, str, Callable[[Commands], str]]]:
    from pipeline_lib.backtranslation.mix_settings import MixSettings
    from pipeline_lib.evaluate.score_settings import ScoreSettings
    from pipeline_lib.evaluate.significance_settings import SignificanceSettings
    from pipeline_lib.train.profile_settings import ProfileSettings

    def first_profiled(c: Commands) -> str:
        return c.plan.profiled_names()[0]

    return [
        ("config.yaml", ScoreSettings, "evaluation", lambda cfg: cfg.setdefault("evaluation", {}),
         "score", lambda c: c.score(next(iter(c.plan.experiments)), "test")),
        ("config.yaml", SignificanceSettings, "evaluation", lambda cfg: cfg.setdefault("evaluation", {}),
         "significance", lambda c: c.significance(next(iter(c.plan.significance)))),
        ("config.demo_bt.yaml", MixSettings, "backtranslation",
         lambda cfg: next(iter(cfg["backtranslation"].values())),
         "bt-mix", lambda c: c.bt_mix(next(iter(c.plan.backtranslation)))),
        ("config.yaml", ProfileSettings, "recipe", _first_profiled_recipe,
         "profile", lambda c: c.profile(first_profiled(c))),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "config_name,cls,marker,block_of,stage,command",
    _renamed_key_stages(),
    ids=lambda v: v if isinstance(v, str) and not v.startswith("config") else None,
)
def test_every_stage_key_of_the_schema_reaches_its_field_under_the_configs_name(
    config_name, cls, marker, block_of, stage, command
):
    """bootstrap_samples is significance's --n-samples, profile_seed profile's --seed, tagged bt-mix's
    inverted --no-tag: each generated key, set to a value other than the config's default, must arrive
    in the field it names."""
    import dataclasses

    from pipeline_lib.dataclass_cli import config_keys
    from pipeline_lib.field_spec import json_schema
    from pipeline_lib.workflow.schema import FILLED

    specs = json_schema(cls, marker, defaults=marker in FILLED)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    keys = config_keys(cls, marker)
    assert keys
    for key, name in keys.items():
        cfg = load(config_name)
        if "default" in specs[key]:  # a key the schema fills in: left out, the stage gets that value
            block_of(cfg).pop(key, None)
            args = parse(stage, command(Commands(plan_of(cfg))))
            assert getattr(args, name) == specs[key]["default"], key
        default = specs[key].get("default", fields[name].default)
        value = _other_value(specs[key], default)
        block_of(cfg)[key] = value
        args = parse(stage, command(Commands(plan_of(cfg))))
        assert getattr(args, name) == value != default, key


def test_an_entry_without_tagged_mixes_untagged_as_edunov_et_al():
    cfg = load("config.demo_bt.yaml")
    entry = next(iter(cfg["backtranslation"].values()))
    entry.pop("tagged", None)
    args = parse("bt-mix", Commands(plan_of(cfg)).bt_mix(next(iter(cfg["backtranslation"]))))
    assert args.tagged is False and args.upsample_real == entry.get("upsample_real", 1)


def test_averaging_keys_choose_the_average_flags_and_default_to_the_last_five_epochs():
    cfg = load("config.yaml")
    name = next(iter(plan_of(cfg).experiments))
    recipe = cfg["recipes"][plan_of(cfg).experiments[name]["recipe"]]
    for key in ("average_last", "average_kind", "average_upper_bound"):
        recipe.pop(key, None)
    args = parse("average", Commands(plan_of(cfg)).average(name))
    assert (args.num_epoch_checkpoints, args.num_update_checkpoints, args.checkpoint_upper_bound) == (
        5,
        None,
        None,
    )
    recipe.update(average_last=3, average_upper_bound=4, keep_last_epochs=-1)
    args = parse("average", Commands(plan_of(cfg)).average(name))
    assert (args.num_epoch_checkpoints, args.checkpoint_upper_bound) == (3, 4)


def test_update_averaging_without_average_last_needs_the_five_it_averages_kept():
    """average_last defaults to 5 in the average flags, so the keep check counts 5 too."""
    from pipeline_lib.errors import ConfigError

    cfg = load("config.yaml")
    recipe_name = plan_of(cfg).experiments[next(iter(plan_of(cfg).experiments))]["recipe"]
    recipe = cfg["recipes"][recipe_name]
    recipe.pop("average_last", None)
    recipe.update(average_kind="update", keep_interval_updates=4)
    with pytest.raises(ConfigError, match=r"keep_interval_updates.*average_last \(5\)"):
        plan_of(cfg)
    recipe["keep_interval_updates"] = 5
    plan_of(cfg)


def test_preprocess_switches_follow_the_config_and_omitted_keys_keep_the_stage_defaults():
    cfg = copy.deepcopy(DEMO)
    ds = next(iter(cfg["datasets"]))
    defaults = parse("preprocess", Commands(plan_of(cfg)).preprocess(ds))
    assert (defaults.normalize, defaults.aggressive, defaults.dedup, defaults.lowercase) == (
        True,
        True,
        False,
        False,
    )
    cfg["datasets"][ds]["preprocess"] = {
        "normalize": False, "aggressive": False, "dedup": True, "lowercase": True, "valid_every": 0,
        "ratio": 9.0, "min_len": 2, "max_len": 80, "clean_splits": [],
    }  # fmt: skip
    args = parse("preprocess", Commands(plan_of(cfg)).preprocess(ds, 3))
    assert (args.normalize, args.aggressive, args.dedup, args.lowercase) == (False, False, True, True)
    assert (args.ratio, args.min_len, args.max_len, args.valid_every, args.workers) == (9.0, 2, 80, 0, 3)
    assert args.splits == ["train", "valid", "mono"] and args.clean_after == "tokenize"
    assert args.clean_splits == []  # "clean nothing", not the stage's default of train and valid


def test_clean_after_bpe_moves_the_length_limits_from_preprocess_to_apply_bpe():
    cfg = copy.deepcopy(ENFR)
    ds = "wmt14_en_fr"
    limits = {"ratio": 2.0, "min_len": 3, "max_len": 100}  # not the stages' defaults
    cfg["datasets"][ds]["preprocess"].update(limits)
    plan = plan_of(cfg)
    stage_defaults = parse("preprocess", "--in-dir a --out-dir b --src en --tgt fr")
    pre = parse("preprocess", Commands(plan).preprocess(ds))
    assert pre.clean_after == "bpe"
    assert (pre.ratio, pre.min_len, pre.max_len) == (
        stage_defaults.ratio,
        stage_defaults.min_len,
        stage_defaults.max_len,
    )
    bpe = parse("apply-bpe", Commands(plan).apply_bpe(ds))
    assert bpe.clean_splits == ["train", "valid"]
    assert (bpe.ratio, bpe.min_len, bpe.max_len) == (limits["ratio"], limits["min_len"], limits["max_len"])
    # the test split is never cleaned, in either stage
    assert parse("preprocess", Commands(plan).preprocess(ds, test=True)).clean_after == "tokenize"
    test_bpe = parse("apply-bpe", Commands(plan).apply_bpe(ds, test=True))
    assert test_bpe.clean_splits == [] and test_bpe.splits == ["test"]


def test_an_empty_demo_book_list_means_no_such_split():
    cfg = copy.deepcopy(DEMO)
    ds = next(n for n, d in cfg["datasets"].items() if d["source"] == "demo")
    cfg["datasets"][ds]["demo"] = {
        **cfg["datasets"][ds].get("demo", {}),
        "test_books": [],
        "mono_books": ["Jonah"],
    }
    args = parse("prepare-demo", Commands(plan_of(cfg)).prepare_demo(ds))
    assert args.test_books == [] and args.mono_books == ["Jonah"]
    assert args.valid_books == cfg["datasets"][ds]["demo"]["valid_books"]


def test_an_experiment_seed_of_zero_reaches_training_and_profiling():
    from pipeline_lib.train.cli import train_config_from_args

    cfg = copy.deepcopy(DEMO)
    plan = plan_of(cfg)
    name = plan.profiled_names()[0]
    cfg["experiments"][name]["seed"] = 0
    plan = plan_of(cfg)
    assert train_config_from_args(parse("train", Commands(plan).train(name, 1))).seed == 0
    assert parse("profile", Commands(plan).profile(name)).seed == 0


def test_profile_takes_the_closed_form_or_the_recursion_and_caps_its_batch():
    cfg = copy.deepcopy(DEMO)
    name = plan_of(cfg).profiled_names()[0]
    recipe = cfg["experiments"][name]["recipe"]
    cfg["recipes"][recipe].update(admin_recursion="cumulative", profile_max_tokens=50_000)
    args = parse("profile", Commands(plan_of(cfg)).profile(name))
    assert (args.closed_form, args.recursion, args.max_tokens) == (False, "cumulative", 8192)
    cfg["recipes"][recipe].update(admin_closed_form=True, profile_max_tokens=1000)
    args = parse("profile", Commands(plan_of(cfg)).profile(name))
    assert (args.closed_form, args.recursion, args.max_tokens) == (True, "reference", 1000)


def test_average_counts_the_checkpoints_of_the_recipes_kind():
    cfg = copy.deepcopy(DEMO)
    name = next(iter(plan_of(cfg).experiments))
    recipe = cfg["experiments"][name]["recipe"]
    cfg["recipes"][recipe].update(average_kind="update", average_last=7, keep_interval_updates=7)
    args = parse("average", Commands(plan_of(cfg)).average(name))
    assert args.num_update_checkpoints == 7 and not args.num_epoch_checkpoints


def test_back_translation_mix_and_shards_reach_their_stages():
    cfg = load("config.demo_bt.yaml")
    plan = plan_of(cfg)
    bt, spec = next(iter(plan.backtranslation.items()))
    args = parse("bt-mix", Commands(plan).bt_mix(bt))
    assert [str(p) for p in args.synthetic_src] == BacktranslationRules(plan).shard_files(bt)
    assert args.tagged is spec["tagged"] and args.upsample_real == spec.get("upsample_real", 1)
    untagged = copy.deepcopy(cfg)
    untagged["backtranslation"][bt]["tagged"] = not spec["tagged"]
    assert parse("bt-mix", Commands(plan_of(untagged)).bt_mix(bt)).tagged is (not spec["tagged"])
    shard = parse("translate", Commands(plan).backtranslate(bt, spec["shards"] - 1, 2))
    assert shard.shard == (spec["shards"] - 1, spec["shards"]) and shard.threads == 2


def test_significance_lists_every_system_and_turns_the_matrix_off_only_when_asked():
    plan = plan_of(DEMO)
    for table, (_base, systems, matrix) in plan.significance.items():
        args = parse("significance", Commands(plan).significance(table))
        assert args.no_matrix is (not matrix), table
        named = [s if isinstance(s, str) else "=".join(map(str, s)) for s in args.systems]
        assert named == [f"{s}={plan.hyp_file(s)}" for s in systems], table
        assert (
            args.n_samples == plan.evaluation["bootstrap_samples"] and args.alpha == plan.evaluation["alpha"]
        )


@pytest.mark.parametrize(
    ("config", "bound"), [("config.wmt14_en_fr.yaml", 50), ("config.iwslt14_fig10.yaml", 90)]
)
def test_every_average_takes_its_scripts_upper_bound(config: str, bound: int):
    """deepnmt nmt_eval/eval_enfr.sh:16,28 (50) and Transformer-Clinic eval_iwslt_de-en.sh:5,12 (90)."""
    plan = plan_of(load(config))
    for name in plan.experiments:
        args = parse("average", Commands(plan).average(name))
        assert (args.checkpoint_upper_bound, args.num_epoch_checkpoints) == (bound, 10), name


def test_a_profile_seed_shares_one_profile_across_seeds_and_cells():
    plan = plan_of(load("config.iwslt14_fig10.yaml"))
    assert plan.profile_owners() == ["iwslt_6L6L_admin-s1111"]  # Table 2's five seeds and Figure 10's cells
    for name in plan.profiled_names():
        assert plan.admin_profile(name) == plan.admin_profile("iwslt_6L6L_admin-s1111")
        assert parse("train", Commands(plan).train(name)).seed == plan.experiments[name]["seed"]
    assert parse("profile", Commands(plan).profile("iwslt_6L6L_admin-s5555")).seed == 1111

    per_seed = load("config.iwslt14_fig10.yaml")  # without profile_seed: a profile per run, at its seed
    for recipe in per_seed["recipes"].values():
        recipe.pop("profile_seed", None)
    plan = plan_of(per_seed)
    assert plan.profile_owners() == sorted(plan.profiled_names())
    assert parse("profile", Commands(plan).profile("iwslt_6L6L_admin-s5555")).seed == 5555
