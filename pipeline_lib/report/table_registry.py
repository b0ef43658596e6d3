"""The table-kind registry: every key of the config's ``tables`` section, with the experiments a table
of that kind names, what its paired bootstrap compares, which metrics it may be tested on, and how
results/tables.md renders it.

The workflow's plan (which runs the tables read, which significance files they need), the config's
cross-reference checks and the report read this registry; nothing else names a table kind. Adding a
kind is one :func:`register` call; its ``render`` may be ``"module:function"`` so that the workflow
reads the registry without importing the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.metric_registry import bleu_names, testable_names
from pipeline_lib.named_registry import Lazy, Registry, resolve

Table = dict[str, Any]
Groups = dict[str, list[str]]  # seed group -> its runs
# (table, seed groups) -> (baseline, systems, pairwise matrix?), or None: nothing to test
Tested = Callable[[Table, Groups], tuple[str, list[str], bool] | None]


@dataclass(frozen=True)
class TableKind:
    key: str  # under `tables:` in the config
    references: Callable[[Any], list[tuple[str, str]]]  # table -> (field, experiment), in the table's order
    # (report spec, table, runs, its significance JSON or None) -> markdown lines; None: not in tables.md
    render: Lazy | None = None
    many: bool = False  # a list of tables, each with a `name` (its significance file's name)
    tested: Tested | None = None  # what its paired bootstrap compares
    test_name: str | None = None  # a single table's significance file name (default: key)
    metric_choices: Callable[[], tuple[str, ...]] = testable_names  # what its `metric` may be
    single_runs: bool = False  # its systems are single runs' outputs (no seed group)
    tabled: bool = True  # its experiments are rows of results/tables.md
    paper: str = "rows"  # its `paper:` block: numbers per row, or "matrix": the published pairwise marks

    def renderer(self) -> Callable[..., list[str]]:
        if self.render is None:
            raise ConfigError(f"table kind {self.key!r} is not rendered in results/tables.md")
        return resolve(self.render)


TABLE_KINDS: Registry[TableKind] = Registry("table kind", lambda kind: kind.key)
register, unregister = TABLE_KINDS.register, TABLE_KINDS.unregister


def table_kinds(tabled: bool | None = None) -> list[TableKind]:
    return [k for k in TABLE_KINDS.values() if tabled is None or k.tabled == tabled]


@dataclass(frozen=True)
class Instance:
    """One configured table: its kind, config key, significance file name and spec."""

    kind: TableKind
    key: str  # "tables.table1", "tables.comparisons[2]"
    name: str
    table: Any

    def references(self) -> Iterator[tuple[str, str]]:
        """(config key, experiment) of every experiment the table names."""
        for field, name in self.kind.references(self.table):
            yield (f"{self.key}.{field}" if field else self.key), name

    def names(self) -> list[str]:
        return [name for _, name in self.kind.references(self.table)]


def instances(tables: dict[str, Any], tabled: bool | None = None) -> Iterator[Instance]:
    """Every table the config's ``tables`` section holds, kind by kind in the registry's order."""
    for kind in table_kinds(tabled):
        if kind.key not in tables:
            continue
        if kind.many:
            for i, table in enumerate(tables[kind.key]):
                yield Instance(kind, f"tables.{kind.key}[{i}]", table["name"], table)
        else:
            yield Instance(kind, f"tables.{kind.key}", kind.test_name or kind.key, tables[kind.key])


def baseline_and_rows(table: Table) -> list[tuple[str, str]]:
    return [("baseline", table["baseline"]), *(("rows", r) for r in table["rows"])]


def rows_and_baseline(table: Table) -> list[tuple[str, str]]:
    return [*(("rows", r) for r in table["rows"]), *([("baseline", table["baseline"])] if "baseline" in table else [])]  # fmt: skip


def baseline_and_systems(table: Table) -> list[tuple[str, str]]:
    return [("baseline", table["baseline"]), *(("systems", s) for s in table["systems"])]


def vs_baseline(table: Table, groups: Groups) -> tuple[str, list[str], bool] | None:
    """Each row against the baseline. A seed group's row is a mean over runs: the paired bootstrap tests
    one run's output, so a group is left out (a table whose baseline is a group has no marks)."""
    base = table.get("baseline", table["rows"][0])
    rows = [r for r in table["rows"] if r != base and r not in groups]
    return (base, rows, False) if rows and base not in groups else None


def pairwise(table: Table, groups: Groups) -> tuple[str, list[str], bool]:
    """Every system against every other (the Table 3 matrix)."""
    return table["baseline"], [s for s in table["systems"] if s != table["baseline"]], True


_T = "pipeline_lib.report.tables"
register(TableKind("table1", baseline_and_rows, f"{_T}:table1_section", tested=vs_baseline, metric_choices=bleu_names))  # fmt: skip
register(TableKind("comparisons", rows_and_baseline, f"{_T}:comparison_section", many=True, tested=vs_baseline))  # fmt: skip
register(TableKind("significance", baseline_and_systems, f"{_T}:matrix_section", tested=pairwise, test_name="table3", single_runs=True, paper="matrix"))  # fmt: skip
# The fine-grained analysis (Figure 3): a list of single runs, no table of its own in tables.md.
register(TableKind("analysis", lambda systems: [("", s) for s in systems], single_runs=True, tabled=False))  # fmt: skip
