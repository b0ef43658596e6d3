"""Very Deep Table 3's published +/=/- matrix beside ours: each differing cell shows the paper's mark,
and the agreement is counted over the cells both make a claim on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_lib.errors import ConfigError
from pipeline_lib.report.table_registry import TABLE_KINDS, Instance
from pipeline_lib.report.tables import render_matrix
from pipeline_lib.workflow.crossref import _check_paper_matrix


def significance_json(tmp_path: Path) -> str:
    path = tmp_path / "table3.json"
    pairwise = {"systems": ["a6", "b12", "c24"], "scores": [41.0, 42.0, 42.1], "alpha": 0.05,
                "signature": "sig", "matrix": [["", "-", "-"], ["+", "", "="], ["+", "=", ""]]}  # fmt: skip
    path.write_text(json.dumps({"n_samples": 100, "pairwise": {"tok_bleu": pairwise}}))
    return str(path)


def test_differing_cells_show_the_papers_mark_and_the_agreement_is_counted(tmp_path: Path):
    paper = {"matrix": [".--", "+.+", "+-."], "source": "Liu et al. 2020b, Table 3"}
    lines = render_matrix("Table 3", significance_json(tmp_path), {}, paper=paper)
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
    rows = {row[0]: row[2:] for row in cells if row[0][:2] in ("a:", "b:", "c:")}
    assert rows["b:b12"] == ["+", "", "= [paper +]"]
    assert rows["c:c24"] == ["+", "= [paper -]", ""]
    assert rows["a:a6"] == ["", "-", "-"]
    # 6 off-diagonal cells, the two '=' of ours against the paper's '+' and '-' differ
    assert any("(Liu et al. 2020b, Table 3): 4 of 6 compared cells agree" in line for line in lines)


def test_without_a_paper_matrix_the_table_is_unchanged(tmp_path: Path):
    lines = render_matrix("Table 3", significance_json(tmp_path), {})
    assert not any("paper" in line for line in lines)


def _instance(systems: list[str], matrix: list[str]) -> Instance:
    table = {"baseline": systems[0], "systems": systems, "paper": {"matrix": matrix, "source": "s"}}
    return Instance(TABLE_KINDS["significance"], "tables.significance", "table3", table)


@pytest.mark.parametrize(
    ("matrix", "key"),
    [([".-", "+."], "tables.significance.paper.matrix"),  # 2 rows for 3 systems
     ([".--", "+.+", "+-"], "tables.significance.paper.matrix[2]"),  # a row one mark short
     ([".--", "++-", "+-."], "tables.significance.paper.matrix[1]")],  # no '.' on the diagonal
)  # fmt: skip
def test_a_malformed_paper_matrix_is_refused_naming_its_key(matrix: list[str], key: str):
    with pytest.raises(ConfigError, match=rf"'{key}'".replace("[", r"\[").replace("]", r"\]")):
        _check_paper_matrix(_instance(["a", "b", "c"], matrix))
    _check_paper_matrix(_instance(["a", "b", "c"], [".--", "+.+", "+-."]))  # well-formed: no error
