"""References between config sections (experiments -> datasets/widths/recipes, tables -> experiments,
back-translation -> reverse models), checked before any rule is built."""

from __future__ import annotations

from typing import Any

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.metric_registry import METRICS
from pipeline_lib.model.config import PRESETS, hybrid_problem
from pipeline_lib.report.table_registry import TABLE_KINDS, Instance, instances
from pipeline_lib.train.average_settings import AveragingRecipe
from pipeline_lib.workflow.experiments import seed_groups


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
    _check_tables(config, seed_groups(config["experiments"]))
    _check_metrics(config)


def _check_tables(config: dict[str, Any], groups: dict[str, list[str]]) -> None:
    """Each table kind is registered, each experiment a table names exists (a seed group only where
    the kind reads means over runs), and each paper number belongs to a row of its table."""
    for key in config["tables"]:
        if key not in TABLE_KINDS:
            fail(f"tables.{key}", f"unknown table kind (known: {', '.join(TABLE_KINDS)})")
    for table in instances(config["tables"]):
        for key, name in table.references():
            if name not in config["experiments"] and not any(name in runs for runs in groups.values()):
                fail(key, f"unknown experiment {name!r}")
            if name in groups and table.kind.single_runs:
                fail(
                    key,
                    f"{name!r} is a seed group (mean over {len(groups[name])} runs); the paired bootstrap and "
                    f"the analysis compare single runs' outputs: name one run, e.g. {groups[name][0]!r}",
                )
    for table in instances(config["tables"]):
        _check_paper_rows(table)


def _check_metrics(config: dict[str, Any]) -> None:
    """Every metric a table names is registered (pipeline_lib.evaluate.metric_registry), and a table
    is tested on one its kind can test (evaluation.metrics is the schema's: an enum of the registry)."""
    for table in instances(config["tables"], tabled=True):
        for j, name in enumerate(table.table.get("metrics", [])):
            if name not in METRICS:
                fail(f"{table.key}.metrics[{j}]", f"unknown metric {name!r} (known: {', '.join(METRICS)})")
        choices = table.kind.metric_choices()
        if "metric" in table.table and table.table["metric"] not in choices:
            fail(
                f"{table.key}.metric",
                f"{table.table['metric']!r} cannot be tested in this table (choose from: {', '.join(choices)})",
            )


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
    if problem := hybrid_problem(exp["residual"], exp.get("decoder_residual")):
        fail(f"{where}.decoder_residual", problem)
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
        averaging = AveragingRecipe.of(rec)
        last, kind, bound = averaging.average_last, averaging.average_kind, averaging.average_upper_bound
        if kind == "update" and rec.get("keep_interval_updates", 0) < last:
            fail(
                f"recipes.{name}.keep_interval_updates",
                f"must be >= average_last ({last}) with average_kind: update",
            )
        if bound is not None and kind == "update":
            fail(f"recipes.{name}.average_upper_bound", "bounds epoch averaging only (average_kind: epoch)")
        if bound is not None and bound < last:
            fail(
                f"recipes.{name}.average_upper_bound",
                f"{bound} leaves fewer than average_last ({last}) epochs",
            )
        keep = rec.get("keep_last_epochs", -1)
        if bound is not None and keep >= 0:
            # pruning keeps only the newest epochs: those up to the bound would be gone by the end
            fail(
                f"recipes.{name}.keep_last_epochs",
                f"must be -1 (keep all) with average_upper_bound ({bound})",
            )


def _check_paper_rows(table: Instance) -> None:
    """A paper number belongs to a row of its own table (a typo would silently show nothing)."""
    if not isinstance(table.table, dict):
        return
    if table.kind.paper == "matrix":
        _check_paper_matrix(table)
        return
    rows = [table.table.get("baseline"), *table.names()]
    for name in table.table.get("paper", {}):
        if name not in rows:
            fail(
                f"{table.key}.paper.{name}",
                f"not a row of this table (rows: {', '.join(dict.fromkeys(r for r in rows if r))})",
            )


def _check_paper_matrix(table: Instance) -> None:
    """The published matrix is square over the table's systems, with the diagonal marked '.'."""
    paper = table.table.get("paper")
    if not paper:
        return
    systems = table.table.get("systems", [])
    matrix = paper["matrix"]
    if len(matrix) != len(systems):
        fail(f"{table.key}.paper.matrix", f"has {len(matrix)} rows for {len(systems)} systems")
    for i, row in enumerate(matrix):
        if len(row) != len(systems) or row[i] != ".":
            fail(
                f"{table.key}.paper.matrix[{i}]",
                f"{row!r}: needs {len(systems)} marks, '.' at position {i + 1} (the diagonal)",
            )
