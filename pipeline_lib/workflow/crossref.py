"""References between config sections (experiments -> datasets/widths/recipes, tables -> experiments,
back-translation -> reverse models), checked before any rule is built."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import PRESETS
from pipeline_lib.workflow.experiments import seed_groups

# Table keys whose systems are single runs: the pairwise matrix and the analysis read one output each.
SINGLE_RUN_KEYS = ("tables.significance", "tables.analysis")


def fail(key: str, message: str) -> None:
    raise ConfigError(f"config key '{key}': {message}", key=key)


def check_references(config: dict[str, Any], experiments: dict[str, dict[str, Any]]) -> None:
    if not experiments:
        fail("experiments", "is empty and there is no stability_map: nothing to train")
    _check_datasets(config["datasets"])
    _check_widths(config["widths"])
    for name, exp in experiments.items():
        _check_experiment(config, name, exp)
    for name, bt in config["backtranslation"].items():
        _check_backtranslation(config, experiments, name, bt)
    _check_recipes(config["recipes"])
    if config["evaluation"]["decoding"] not in config["decoding"]:
        fail("evaluation.decoding", f"unknown decoding {config['evaluation']['decoding']!r}")
    groups = seed_groups(config["experiments"])
    for key, name in table_references(config["tables"]):
        if name not in config["experiments"] and not any(name in runs for runs in groups.values()):
            fail(key, f"unknown experiment {name!r}")
        if name in groups and key.startswith(SINGLE_RUN_KEYS):
            fail(
                key,
                f"{name!r} is a seed group (mean over {len(groups[name])} runs); the paired bootstrap and "
                f"the analysis compare single runs' outputs: name one run, e.g. {groups[name][0]!r}",
            )
    _check_paper_rows(config["tables"])


def _check_datasets(datasets: dict[str, dict[str, Any]]) -> None:
    for name, ds in datasets.items():
        if ds["source"] == "download" and "recipe" not in ds:
            fail(f"datasets.{name}.recipe", "required with source: download")
        if ds["source"] == "local" and "path" not in ds:
            fail(f"datasets.{name}.path", "required with source: local")
        if ds["src"] == ds["tgt"]:
            fail(f"datasets.{name}.tgt", "must differ from src")
        mono = ds.get("mono")
        if isinstance(mono, dict):
            if ds["source"] == "local":
                fail(f"datasets.{name}.mono", "a local dataset reads <path>/mono.<tgt>; download it there")
            lang = mono["recipe"].rsplit("-", 1)[-1]
            if lang != ds["tgt"]:
                fail(
                    f"datasets.{name}.mono.recipe",
                    f"{mono['recipe']} is {lang} text, the target is {ds['tgt']}",
                )


def _check_widths(widths: dict[str, dict[str, Any]]) -> None:
    """The model's own shape checks, at parse time instead of when a job builds the model."""
    for name, width in widths.items():
        d_model, _, heads = PRESETS[width["arch"]]
        d_model, heads = width.get("d_model", d_model), width.get("heads", heads)
        if d_model % heads:
            key = "heads" if "heads" in width else "d_model"
            fail(f"widths.{name}.{key}", f"d_model {d_model} is not divisible by {heads} heads")


def _check_experiment(config: dict[str, Any], name: str, exp: dict[str, Any]) -> None:
    where = "stability_map" if "stability" in exp else f"experiments.{name}"
    for field, section in (("dataset", "datasets"), ("width", "widths"), ("recipe", "recipes")):
        if exp[field] not in config[section]:
            fail(f"{where}.{field}", f"unknown {field} {exp[field]!r} (known: {sorted(config[section])})")
    if exp.get("decoding", "default") not in config["decoding"]:
        fail(f"{where}.decoding", f"unknown decoding {exp.get('decoding', 'default')!r}")
    bt = exp.get("backtranslation")
    if bt is None:
        return
    if bt not in config["backtranslation"]:
        fail(f"{where}.backtranslation", f"unknown back-translation setup {bt!r}")
    if config["backtranslation"][bt]["dataset"] != exp["dataset"]:
        fail(
            f"{where}.backtranslation",
            f"{bt!r} is built on dataset {config['backtranslation'][bt]['dataset']!r}",
        )
    if exp.get("direction", "forward") != "forward":
        fail(f"{where}.direction", "back-translation trains a forward model")


def _check_backtranslation(
    config: dict[str, Any], experiments: dict[str, dict[str, Any]], name: str, bt: dict[str, Any]
) -> None:
    key = f"backtranslation.{name}"
    if bt["dataset"] not in config["datasets"]:
        fail(f"{key}.dataset", f"unknown dataset {bt['dataset']!r}")
    rev = experiments.get(bt["reverse_model"])
    if rev is None:
        fail(f"{key}.reverse_model", f"unknown experiment {bt['reverse_model']!r}")
    if rev.get("direction", "forward") != "reverse" or rev["dataset"] != bt["dataset"]:
        fail(
            f"{key}.reverse_model",
            f"{bt['reverse_model']!r} must have direction: reverse and dataset: {bt['dataset']}",
        )
    if bt["decoding"] not in config["decoding"]:
        fail(f"{key}.decoding", f"unknown decoding {bt['decoding']!r}")
    ds = config["datasets"][bt["dataset"]]
    if ds["source"] == "demo" and not ds.get("demo", {}).get("mono_books"):
        fail(f"datasets.{bt['dataset']}.demo.mono_books", "back-translation needs monolingual books")
    if ds["source"] in ("download", "ding") and "mono" not in ds:
        fail(f"datasets.{bt['dataset']}.mono", "back-translation needs monolingual target text")


def _check_recipes(recipes: dict[str, dict[str, Any]]) -> None:
    for name, rec in recipes.items():
        # Averaging update checkpoints needs that many of them kept on disk.
        last = rec.get("average_last", 1)
        if rec.get("average_kind") == "update" and rec.get("keep_interval_updates", 0) < last:
            fail(
                f"recipes.{name}.keep_interval_updates",
                f"must be >= average_last ({last}) with average_kind: update",
            )


def table_references(tables: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(config key, experiment name) of every experiment a table names."""
    if "table1" in tables:
        yield "tables.table1.baseline", tables["table1"]["baseline"]
        yield from (("tables.table1.rows", r) for r in tables["table1"]["rows"])
    for i, comp in enumerate(tables.get("comparisons", [])):
        yield from ((f"tables.comparisons[{i}].rows", r) for r in comp["rows"])
        if "baseline" in comp:
            yield f"tables.comparisons[{i}].baseline", comp["baseline"]
    if "significance" in tables:
        yield "tables.significance.baseline", tables["significance"]["baseline"]
        yield from (("tables.significance.systems", s) for s in tables["significance"]["systems"])
    yield from (("tables.analysis", s) for s in tables.get("analysis", []))


def _check_paper_rows(tables: dict[str, Any]) -> None:
    """A paper number belongs to a row of its own table (a typo would silently show nothing)."""
    owners = [("tables.table1", tables["table1"])] if "table1" in tables else []
    owners += [(f"tables.comparisons[{i}]", c) for i, c in enumerate(tables.get("comparisons", []))]
    for key, table in owners:
        rows = [table.get("baseline"), *table["rows"]]
        for name in table.get("paper", {}):
            if name not in rows:
                fail(
                    f"{key}.paper.{name}",
                    f"not a row of this table (rows: {', '.join(dict.fromkeys(r for r in rows if r))})",
                )
