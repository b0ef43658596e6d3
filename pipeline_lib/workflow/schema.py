"""Schema validation of a workflow config: one error naming the offending key, defaults filled."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from pipeline_lib.errors import ConfigError

SCHEMA_FILE = Path("workflow") / "schemas" / "config.schema.yaml"


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


def load_schema(path: str | Path) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def validate_config(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Validate ``config`` in place (defaults filled); raise ConfigError naming the deepest bad key."""
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(config),
        key=lambda e: len(list(e.absolute_path)),
        reverse=True,
    )
    if errors:
        key = key_path(errors[0])
        raise ConfigError(f"config key '{key}': {errors[0].message}", key=key)
    _fill_defaults(jsonschema.Draft202012Validator)(schema).validate(config)
