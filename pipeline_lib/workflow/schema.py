"""Schema validation of a workflow config: one error naming the offending key, defaults filled.

The YAML schema holds every key except the hyperparameters and the stages' settings: a mapping marked
``x-generated: <part>`` gets the properties of :data:`GENERATED` ``<part>`` when the schema loads, each
from its dataclass field's type, choices, bounds and help (pipeline_lib/field_spec.py), so a setting
and its constraints are written once, beside the code that checks them again on the command line.
Likewise a node marked ``x-enum: <name>`` gets the names of the registry :data:`ENUMS` ``<name>``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline_lib.backtranslation.mix_settings import MixSettings
from pipeline_lib.data.apply_subword import ApplySettings
from pipeline_lib.data.binarize import BinarizeSettings
from pipeline_lib.data.learn_subword import LearnSettings
from pipeline_lib.data.preprocess import PreprocessSettings
from pipeline_lib.data.recipes import MONO_RECIPES, RECIPES, TED_RECIPES
from pipeline_lib.decode.search_config import SearchConfig
from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.score_settings import ScoreSettings
from pipeline_lib.evaluate.significance_settings import SignificanceSettings
from pipeline_lib.field_spec import json_schema
from pipeline_lib.model.config import HYBRID_RESIDUALS, INITS, PRESETS, ModelConfig
from pipeline_lib.model.registry import residual_names
from pipeline_lib.train.average_settings import AveragingRecipe
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.profile_settings import ProfileSettings
from pipeline_lib.workflow.bounded_yaml import check_expanded_size, shorten

SCHEMA_FILE = Path("workflow") / "schemas" / "config.schema.yaml"
MARKER = "x-generated"
ENUM_MARKER = "x-enum"

# name -> the registry whose names a node marked ``x-enum: <name>`` accepts (its ``enum``), so a
# registered variant or recipe is offered by the schema without a hand-kept copy. Metric names stay
# strings the metric registry checks: its messages say why ("cannot be tested").
ENUMS: dict[str, Callable[[], Sequence[str]]] = {
    "residual": residual_names,
    "hybrid_residual": lambda: HYBRID_RESIDUALS,
    "arch": lambda: tuple(PRESETS),
    "init": lambda: INITS,
    "download_recipe": lambda: (*RECIPES, *TED_RECIPES),
    "mono_recipe": lambda: tuple(MONO_RECIPES),
}

# part -> (dataclass, the metadata key marking the fields that go in it)
GENERATED: dict[str, list[tuple[type, str]]] = {
    # recipes and experiment overrides: the trainer's and the model's settings, and the keys the
    # workflow turns into the profile and average stages' flags
    "recipe": [
        (TrainConfig, "recipe"),
        (ModelConfig, "recipe"),
        (ProfileSettings, "recipe"),
        (AveragingRecipe, "recipe"),
    ],
    "decoding": [(SearchConfig, "decoding")],  # the entries of `decoding` (translate's search flags)
    # a dataset's data-stage blocks
    "preprocess": [(PreprocessSettings, "preprocess")],
    "subword": [(LearnSettings, "subword"), (ApplySettings, "subword")],
    "binarize": [(BinarizeSettings, "binarize")],
    # the metrics every run is scored with, and the paired bootstrap's settings
    "evaluation": [(ScoreSettings, "evaluation"), (SignificanceSettings, "evaluation")],
    "backtranslation": [(MixSettings, "backtranslation")],  # an entry's mixing settings
}
# Parts whose defaults the schema fills in (the workflow reads the keys itself); a recipe's or a
# data stage's unset key is left to the stage's own default.
FILLED = {"evaluation", "backtranslation"}


def _fill_defaults(validator_class: type) -> type:
    """A validator that sets each missing property to its schema default, as snakemake's does."""
    check_properties = validator_class.VALIDATORS["properties"]

    def properties(validator, props, instance, schema) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for key, sub in props.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, props, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties})


def key_path(error: jsonschema.ValidationError) -> str:
    """Dotted config key of an error; for an unknown key, the unknown key itself."""
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if extra:
            path = f"{path}.{extra[0]}" if path else extra[0]
    return path or "<top level>"


def generated_properties(part: str) -> dict[str, dict[str, Any]]:
    """The schema properties of the dataclass fields that make up ``part``."""
    props: dict[str, dict[str, Any]] = {}
    for cls, marker in GENERATED[part]:
        props.update(json_schema(cls, marker, defaults=part in FILLED))
    return props


def _fill_generated(node: Any, where: str = "") -> None:
    """Add the generated properties wherever the schema is marked (depth first, in place)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _fill_generated(item, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    if ENUM_MARKER in node:
        name = node.pop(ENUM_MARKER)
        if name not in ENUMS:
            raise ValueError(
                f"{SCHEMA_FILE}: {where}: {ENUM_MARKER}: {name!r} is not one of {', '.join(ENUMS)}"
            )
        node["enum"] = list(ENUMS[name]())
    if MARKER in node:
        part = node.pop(MARKER)
        if part not in GENERATED:
            raise ValueError(
                f"{SCHEMA_FILE}: {where}: {MARKER}: {part!r} is not one of {', '.join(GENERATED)}"
            )
        own = node.get("properties", {})
        generated = generated_properties(part)
        twice = sorted(set(own) & set(generated))
        if twice:
            # A workflow-only key must not shadow a field: the field's declaration is the one.
            raise ValueError(f"{SCHEMA_FILE}: {where}: {', '.join(twice)} declared here and as a field")
        node["properties"] = {**generated, **own}
    for key, value in node.items():
        _fill_generated(value, f"{where}/{key}")


def load_schema(path: str | Path) -> dict[str, Any]:
    """The YAML schema with the generated properties filled in (see the module's docstring)."""
    schema = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    _fill_generated(schema)
    return schema


def validate_config(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Validate ``config`` in place (defaults filled); raise ConfigError naming the deepest bad key.

    The config's size is bounded first (:mod:`.bounded_yaml`) and a message quotes at most the start
    of a value: jsonschema's own messages carry the whole ``repr`` of the bad value."""
    check_expanded_size(config)
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(config),
        key=lambda e: len(list(e.absolute_path)),
        reverse=True,
    )
    if errors:
        key = key_path(errors[0])
        raise ConfigError(f"config key '{key}': {shorten(errors[0].message, 240)}", key=key)
    _fill_defaults(jsonschema.Draft202012Validator)(schema).validate(config)
