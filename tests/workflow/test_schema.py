"""The schema's recipe and decoding keys are generated from the dataclass fields that define and check
them (pipeline_lib/field_spec.py, pipeline_lib/workflow/schema.py): a hyperparameter and its
constraints are written once, and the schema and the dataclass accept the same values."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline_lib.decode.search_config import SearchConfig
from pipeline_lib.errors import ConfigError
from pipeline_lib.field_spec import BOUNDS, check_fields, field_specs, json_schema
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.config_files import load_mapping
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((REPO / SCHEMA_FILE).read_text(encoding="utf-8"))  # as committed, before generation
SCHEMA = load_schema(REPO / SCHEMA_FILE)
DEMO = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
RECIPE = next(iter(DEMO["recipes"]))
DECODING = next(iter(DEMO["decoding"]))


def marked(cls: type, marker: str) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.metadata.get(marker)}


def recipe_props(schema: dict) -> dict[str, Any]:
    return schema["definitions"]["recipe"].get("properties", {})


def decoding_props(schema: dict) -> dict[str, Any]:
    return schema["properties"]["decoding"]["additionalProperties"]["properties"]


def test_recipe_keys_are_the_marked_fields_under_their_config_names():
    """Every recipe key is a field: the trainer's and the model's under their own names, the profile
    and average stages' under the names the config gives them (profile_seed is --seed)."""
    from pipeline_lib.dataclass_cli import config_keys
    from pipeline_lib.train.average_settings import AveragingRecipe
    from pipeline_lib.train.profile_settings import ProfileSettings
    from pipeline_lib.workflow.argv import WORKFLOW_RECIPE_KEYS

    assert not recipe_props(RAW), "a recipe key is declared in the YAML"
    fields = marked(TrainConfig, "recipe") | marked(ModelConfig, "recipe")
    stages = {**config_keys(ProfileSettings, "recipe"), **config_keys(AveragingRecipe, "recipe")}
    assert stages["profile_seed"] == "seed" and stages["admin_recursion"] == "recursion"
    assert not fields & set(stages)
    assert set(recipe_props(SCHEMA)) == fields | set(stages)
    assert set(WORKFLOW_RECIPE_KEYS) == set(stages)  # the keys the command builders read themselves


def test_recipes_and_overrides_share_one_definition():
    recipes = SCHEMA["properties"]["recipes"]["additionalProperties"]
    overrides = SCHEMA["properties"]["experiments"]["additionalProperties"]["properties"]["overrides"]
    assert recipes["$ref"] == overrides["$ref"] == "#/definitions/recipe"
    assert set(recipes["required"]) <= set(recipe_props(SCHEMA))


def test_decoding_keys_are_search_fields_plus_translates_own_and_each_is_a_translate_flag():
    import argparse

    from pipeline_lib.decode.cli import add_arguments

    own = set(decoding_props(RAW))
    assert not own & {f.name for f in dataclasses.fields(SearchConfig)}
    assert set(decoding_props(SCHEMA)) == marked(SearchConfig, "decoding") | own
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {opt for action in parser._actions for opt in action.option_strings}
    # Commands.decoding passes every key of an entry as the translate flag of the same name.
    assert {"--" + key.replace("_", "-") for key in decoding_props(SCHEMA)} <= flags


def outside(spec_bounds: dict[str, float], integer: bool) -> list[float]:
    """One value just past each bound."""
    step = 1 if integer else 0.5
    moves = {"ge": -step, "gt": 0, "le": step, "lt": 0}
    return [bound + moves[key] for key, bound in spec_bounds.items()]


TRAIN_BASE = dict(data="d", source_lang="en", target_lang="fr", save_dir="s", max_epoch=1, max_update=10**6)
MODEL_BASE = dict(src_vocab_size=8, tgt_vocab_size=8)
CASES = [
    (cls, base, name, where)
    for cls, base, marker, where in [
        (TrainConfig, TRAIN_BASE, "recipe", ("recipes", RECIPE)),
        (ModelConfig, MODEL_BASE, "recipe", ("recipes", RECIPE)),
        (SearchConfig, {}, "decoding", ("decoding", DECODING)),
    ]
    for name in sorted(marked(cls, marker))
    if field_specs(cls)[name].bounds or field_specs(cls)[name].choices
]


@pytest.mark.parametrize("cls,base,name,where", CASES, ids=[f"{c[0].__name__}.{c[2]}" for c in CASES])
def test_schema_and_dataclass_reject_the_same_values(cls: type, base: dict, name: str, where: tuple):
    spec = field_specs(cls)[name]
    integer = spec.json_schema().get("type") == "integer"
    bad: list[Any] = ["not-a-choice"] if spec.choices else outside(spec.bounds, integer)
    if spec.length:  # a tuple: one item out of bounds
        bad = [[cls.__dataclass_fields__[name].default[0], b] for b in bad]
    assert bad
    for value in bad:
        cfg = copy.deepcopy(DEMO)
        cfg[where[0]][where[1]][name] = value
        with pytest.raises(ConfigError, match=rf"config key '{where[0]}\.{re.escape(where[1])}\.{name}"):
            validate_config(cfg, SCHEMA)
        with pytest.raises(
            ConfigError, match=re.escape(name.replace("_", "-") if cls is SearchConfig else name)
        ):
            cls(**{**base, name: tuple(value) if spec.length else value})


@pytest.mark.parametrize("cls,base,name,where", CASES, ids=[f"{c[0].__name__}.{c[2]}" for c in CASES])
def test_schema_and_dataclass_accept_an_inclusive_bound(cls: type, base: dict, name: str, where: tuple):
    spec = field_specs(cls)[name]
    inclusive = [v for k, v in spec.bounds.items() if k in ("ge", "le")]
    if spec.choices:
        inclusive = list(spec.choices() if callable(spec.choices) else spec.choices)[:1]
    for value in inclusive:
        item = [value, value] if spec.length else value
        cfg = copy.deepcopy(DEMO)
        cfg[where[0]][where[1]][name] = item
        validate_config(cfg, SCHEMA)
        cls(**{**base, name: tuple(item) if spec.length else item})


def test_a_bound_in_metadata_is_both_checked_and_written_into_the_schema():
    @dataclasses.dataclass(frozen=True)
    class Toy:
        rate: float = dataclasses.field(default=0.5, metadata={"gt": 0, "le": 1, "help": "a rate", "m": 1})
        pair: tuple[float, float] = dataclasses.field(default=(0.0, 0.0), metadata={"ge": 0, "m": 1})
        mode: str = dataclasses.field(default="a", metadata={"choices": ("a", "b"), "m": 1})
        cap: float | str | None = dataclasses.field(
            default=None, metadata={"gt": 0, "keywords": ("auto",), "m": 1}
        )
        count: int | None = dataclasses.field(default=None, metadata={"ge": 1})

    assert json_schema(Toy, "m") == {
        "rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "a rate"},
        "pair": {"type": "array", "items": {"type": "number", "minimum": 0}, "minItems": 2, "maxItems": 2},
        "mode": {"enum": ["a", "b"]},
        "cap": {"oneOf": [{"type": "number", "exclusiveMinimum": 0}, {"enum": ["auto"]}]},
    }
    label = "toy.{}".format
    check_fields(Toy(rate=1, pair=(0, 2.5), cap="auto"), label)
    for kwargs, message in [
        ({"rate": 0}, "toy.rate must be a finite number in (0, 1], got 0"),
        ({"rate": float("nan")}, "toy.rate must be a finite number"),
        ({"pair": (0.1, -1.0)}, "toy.pair must be 2 finite numbers >= 0"),
        ({"mode": "c"}, "toy.mode='c' is not one of a, b"),
        ({"cap": "manual"}, "toy.cap must be a number or 'auto', got 'manual'"),
        ({"cap": -1.0}, "toy.cap must be a finite number > 0"),
        ({"count": 0}, "toy.count must be an integer >= 1, got 0"),
        ({"count": True}, "toy.count must be an integer >= 1, got True"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_fields(Toy(**kwargs), label)
    assert set(BOUNDS) == {"ge", "gt", "le", "lt"}


def test_an_annotation_without_a_schema_is_refused_where_a_schema_or_a_check_needs_one():
    @dataclasses.dataclass
    class Bad:
        names: list[str] = dataclasses.field(default_factory=list, metadata={"recipe": True})
        where: Path = Path(".")  # a stage's path flag: no schema, no check, accepted

    assert "where" not in field_specs(Bad)
    with pytest.raises(TypeError, match=r"Bad: no schema for names \(marked recipe\)"):
        json_schema(Bad, "recipe")

    @dataclasses.dataclass
    class Bounded:
        names: list[str] = dataclasses.field(default_factory=list, metadata={"ge": 1})

    with pytest.raises(TypeError, match="names"):
        field_specs(Bounded)


def test_a_word_list_field_is_an_array_of_distinct_choices():
    @dataclasses.dataclass(frozen=True)
    class Toy:
        splits: tuple[str, ...] = dataclasses.field(
            default=("train",), metadata={"choices": ("train", "valid"), "toy": True}
        )

    assert json_schema(Toy, "toy") == {
        "splits": {"type": "array", "items": {"enum": ["train", "valid"]}, "uniqueItems": True}
    }
    label = lambda name: f"toy.{name}"  # noqa: E731
    check_fields(Toy(splits=()), label)  # an empty list is a value
    for value, message in [
        (("train", "test"), "toy.splits: 'test' is not one of train, valid"),
        (("train", "train"), "toy.splits lists an item twice"),
        ("train", "toy.splits must be a list of words, got 'train'"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_fields(Toy(splits=value), label)


def shipped_config_sets() -> list[list[Path]]:
    """Every config at the repository root and in tests/fixtures: a full one alone (it has
    experiments), an overlay over each full one (config.smoke.yaml), or, where the overlay is named
    after a full config (config.gpu_demo_24gb.yaml after config.gpu_demo.yaml), over that one only."""
    files = sorted(REPO.glob("config*.yaml")) + sorted((REPO / "tests" / "fixtures").glob("*.yaml"))
    full = [f for f in files if "experiments" in load_mapping(f)]
    overlays = [f for f in files if f not in full]
    assert full and overlays
    sets = [[f] for f in full]
    for o in overlays:
        bases = [f for f in full if o.stem.startswith(f"{f.stem}_")]
        sets += [[f, o] for f in (bases or full)]
    return sets


@pytest.mark.parametrize("files", shipped_config_sets(), ids=lambda fs: "+".join(f.name for f in fs))
def test_every_shipped_config_validates(files: list[Path]):
    check(files, REPO)


@pytest.mark.parametrize("section", ["recipes", "decoding"])
def test_a_typo_and_a_bad_generated_value_name_file_line_and_key(tmp_path: Path, section: str):
    name = RECIPE if section == "recipes" else DECODING
    props = recipe_props(SCHEMA) if section == "recipes" else decoding_props(SCHEMA)
    given = DEMO[section][name]
    generated = set(props) - set(recipe_props(RAW) if section == "recipes" else decoding_props(RAW))
    key = next(k for k in sorted(generated) if "exclusiveMinimum" in props[k] and k not in given)
    lines = (REPO / "config.yaml").read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{section}:"))
    at = next(i for i in range(at, len(lines)) if lines[i].startswith(f"  {name}:"))
    flow = "{" in lines[at]  # `default: {beam: 4, ...}`: turn it into a block mapping first
    if flow:
        entry = "".join(f"    {k}: {v}\n" for k, v in given.items())
        lines[at : at + 1] = [f"  {name}:\n", entry]
    for bad, wanted in [(f"{key}_tpyo: 1", f"{key}_tpyo"), (f"{key}: {props[key]['exclusiveMinimum']}", key)]:
        text = lines[: at + 1] + [f"    {bad}\n"] + lines[at + 1 :]
        path = tmp_path / "mine.yaml"
        path.write_text("".join(text), encoding="utf-8")
        with pytest.raises(ConfigError) as err:
            check([path], REPO)
        assert str(err.value).startswith(f"{path}:{at + 2}: config key '{section}.{name}.{wanted}'"), (
            err.value
        )


def test_resuming_with_a_changed_trajectory_field_warns_and_with_a_logging_one_does_not(capsys):
    """TRAJECTORY_KEYS is read off the fields' ``trajectory`` metadata."""
    from pipeline_lib.train.run_checkpoints import check_resumable

    cfg, model = TrainConfig(**TRAIN_BASE), ModelConfig(**MODEL_BASE)

    def warning(**before: Any) -> str:
        state = {"model_config": model.to_dict(), "train_config": {**cfg.to_dict(), **before}}
        check_resumable(state, Path("checkpoint_last.pt"), cfg, model, None, None)
        return capsys.readouterr().err

    assert "resuming with changed lr:" in warning(lr=1.0)
    assert "resuming with changed seed, compile:" in warning(seed=7, compile=True)
    assert warning(log_interval=7, keep_last_epochs=3) == ""


def test_evaluation_metrics_are_the_registrys_names():
    """evaluation.metrics is score's --metrics field: its enum is the metric registry's names, so a
    typo fails at validation, naming the key and the names score accepts."""
    from pipeline_lib.evaluate.metric_registry import metric_names

    props = SCHEMA["properties"]["evaluation"]["properties"]
    assert props["metrics"]["items"]["enum"] == list(metric_names())
    assert "default" not in props["metrics"]  # unset: score's own default set
    cfg = copy.deepcopy(DEMO)
    cfg.setdefault("evaluation", {})["metrics"] = ["bleu", "blue"]
    with pytest.raises(ConfigError, match=r"config key 'evaluation\.metrics\.1': 'blue' is not one of"):
        validate_config(cfg, SCHEMA)
