"""Every `paper:` number of every shipped config is printed in the paper its `source` names, in the
table or footnote it cites (a `§` source: anywhere in that paper's text).

The papers' text is not in the repository: it is read from `$DEEPNMT_PAPERS_DIR`, else `shared/papers`
beside the checkout (or beside its parent, for a worktree); the test skips when neither exists. Each
file holds one paper or several, each opened by a `<paper N>` line; a paper is found by its title.
Tables are markdown (`| ... |`) or tab-separated blocks next to their `Table N:` caption.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline_lib.evaluate.metric_registry import metric_names

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted(p.name for p in REPO.glob("config*.yaml"))
# the `source` strings' authors -> the title their paper's text starts with
TITLES = {
    "Liu et al. 2020b": "Very Deep Transformers for Neural Machine Translation",
    "Liu et al. 2020a": "Understanding the Difficulty of Training Transformers",
    "Wang et al. 2019": "Learning Deep Transformer Models for Machine Translation",
    "Xu et al. 2020": "Why Deep Transformers are Difficult to Converge",
}
SOURCE = re.compile(r"^(?P<who>.+? \d{4}[a-z]?)(?: \([^)]*\))?, (?P<where>.+)$")


def papers_dir() -> Path | None:
    candidates = [os.environ.get("DEEPNMT_PAPERS_DIR")]
    candidates += [str(REPO.parent / "shared" / "papers"), str(REPO.parent.parent / "shared" / "papers")]
    return next((Path(c) for c in candidates if c and Path(c).is_dir()), None)


def load_papers(directory: Path) -> dict[str, list[str]]:
    """title -> the lines of that paper (the first copy found, files in name order)."""
    papers: dict[str, list[str]] = {}
    for path in sorted(directory.glob("*.txt")):
        chunks = re.split(r"^<paper \d+>\s*$", path.read_text(encoding="utf-8"), flags=re.M)
        for chunk in chunks:
            lines = chunk.splitlines()
            head = " ".join(lines[:40])
            for title in TITLES.values():
                if title in head and title not in papers:
                    papers[title] = lines
    return papers


def _block(lines: list[str], start: int, step: int) -> list[str]:
    """The non-blank block next to line ``start`` in direction ``step``, if it looks like a table."""
    i = start + step
    while 0 <= i < len(lines) and not lines[i].strip():
        i += step
    block = []
    while 0 <= i < len(lines) and lines[i].strip() and not lines[i].startswith("Table "):
        block.append(lines[i])
        i += step
    while 0 <= i < len(lines) and not lines[i].strip():
        i += step
    if step > 0 and 0 <= i < len(lines) and lines[i].startswith("Table "):
        return []  # a table between two captions is the next one's (captions below their tables)
    tabular = sum(("|" in line or "\t" in line) for line in block)
    return block if block and tabular * 2 > len(block) else []


def region(lines: list[str], where: str) -> str:
    """The text a source cites: its tables' blocks, its footnote's line, else the whole paper."""
    tables = re.match(r"Tables? ([\d, and]+)", where)
    if tables:
        numbers = re.findall(r"\d+", tables.group(1))
        text = []
        for n in numbers:
            captions = [i for i, line in enumerate(lines) if line.startswith(f"Table {n}:")]
            assert captions, f"no caption 'Table {n}:' in the paper"
            for i in captions:
                text += _block(lines, i, -1) + _block(lines, i, +1)
        return "\n".join(text)
    figure = re.match(r"Figure (\d+)", where)
    if figure:  # a figure's numbers are in its caption only
        captions = [line for line in lines if line.startswith(f"Figure {figure.group(1)}:")]
        assert captions, f"no caption 'Figure {figure.group(1)}:' in the paper"
        return "\n".join(captions)
    footnote = re.match(r"footnote (\d+)", where)
    if footnote:
        mark = "${ }^{" + footnote.group(1) + "}$"
        notes = [line for line in lines if line.lstrip().startswith(("[^", mark)) and mark in line]
        assert notes, f"no footnote {footnote.group(1)} in the paper"
        return "\n".join(notes)
    return "\n".join(lines)


def numbers_in(text: str) -> set[float]:
    # bold digits are spelled out one by one: $\mathbf{3 5 . 6 7}$
    text = re.sub(r"\\math(?:bf|rm)\{([\d .]+)\}", lambda m: m.group(1).replace(" ", ""), text)
    return {float(x) for x in re.findall(r"(?<![\d.])\d+(?:\.\d+)?", text)}


def paper_values(config: dict[str, Any]) -> Iterator[tuple[str, str, float, str]]:
    """(where in the config, key, value, source) of every paper number."""
    tables = config.get("tables", {})
    named = [("table1", tables.get("table1"))]
    named += [(f"comparisons.{c['name']}", c) for c in tables.get("comparisons", [])]
    keys = {*metric_names(), *(f"{m}_std" for m in metric_names())}
    for name, table in named:
        for row, entry in ((table or {}).get("paper") or {}).items():
            for key, value in entry.items():
                if key in keys:
                    yield f"tables.{name}.paper.{row}", key, float(value), entry["source"]
    for method, entry in ((config.get("stability_map") or {}).get("paper") or {}).items():
        for key in ("diverged", "of"):
            if entry[key]:  # "converges in all 15 settings": no 0 is printed
                yield f"stability_map.paper.{method}", key, float(entry[key]), entry["source"]


def paper_matrix(lines: list[str]) -> list[str]:
    """A markdown +/=/- matrix as the config writes it: one string per row, '.' on the diagonal."""
    rows = {}
    for line in lines:  # a block above its caption comes bottom-up: rows are put back by their letter
        cells = [c.strip().replace("$", "") for c in line.strip().strip("|").split("|")]
        if re.match(r"^[a-z]:", cells[0]):
            rows[cells[0][0]] = "".join(c or "." for c in cells[2:])
    return [rows[letter] for letter in sorted(rows)]


def matrix_problems(config: dict[str, Any], papers: dict[str, list[str]]) -> list[str]:
    paper = ((config.get("tables") or {}).get("significance") or {}).get("paper")
    if not paper:
        return []
    m = SOURCE.match(paper["source"])
    assert m and m.group("who") in TITLES, f"significance: source {paper['source']!r} names no known paper"
    printed = paper_matrix(region(papers[TITLES[m.group("who")]], m.group("where")).splitlines())
    if printed != paper["matrix"]:
        return [f"tables.significance.paper.matrix: {paper['matrix']} is not {paper['source']}'s {printed}"]
    return []


def problems(config: dict[str, Any], papers: dict[str, list[str]]) -> list[str]:
    found = []
    for where, key, value, source in paper_values(config):
        m = SOURCE.match(source)
        assert m and m.group("who") in TITLES, f"{where}: source {source!r} names no known paper"
        lines = papers[TITLES[m.group("who")]]
        if value not in numbers_in(region(lines, m.group("where"))):
            found.append(f"{where}.{key}: {value} is not in {source}")
    return found


@pytest.fixture(scope="module")
def papers() -> dict[str, list[str]]:
    directory = papers_dir()
    if directory is None:
        pytest.skip("no papers' text (set DEEPNMT_PAPERS_DIR or put it in ../shared/papers)")
    loaded = load_papers(directory)
    missing = sorted(set(TITLES.values()) - set(loaded))
    assert not missing, f"{directory}: no text for {missing}"
    return loaded


@pytest.mark.parametrize("name", CONFIGS)
def test_every_paper_value_is_printed_where_its_source_says(name: str, papers) -> None:
    config = yaml.safe_load((REPO / name).read_text(encoding="utf-8"))
    assert problems(config, papers) == []
    assert matrix_problems(config, papers) == []


def test_a_planted_wrong_value_is_found(papers) -> None:
    config = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text(encoding="utf-8"))
    assert sum(1 for _ in paper_values(config)) > 20
    wrong = copy.deepcopy(config)
    wrong["tables"]["table1"]["paper"]["enfr_60L12L_admin"]["ter"] = 40.2  # the paper: 40.3
    std = yaml.safe_load((REPO / "config.iwslt14_fig10.yaml").read_text(encoding="utf-8"))
    std["tables"]["table1"]["paper"]["iwslt_6L6L_admin"]["tok_bleu_std"] = 0.51  # the paper: 0.15
    # a number printed elsewhere in the paper but not in the cited table: 43.2 is footnote 10's
    moved = copy.deepcopy(config)
    moved["tables"]["table1"]["paper"]["enfr_6L6L_admin"]["tok_bleu"] = 43.2
    assert problems(wrong, papers) == [
        "tables.table1.paper.enfr_60L12L_admin.ter: 40.2 is not in "
        "Liu et al. 2020b (Very Deep Transformers), Tables 1 and 2"
    ]
    assert problems(std, papers) == [
        "tables.table1.paper.iwslt_6L6L_admin.tok_bleu_std: 0.51 is not in "
        "Liu et al. 2020a (Admin), Table 2 (mean ± std over runs)"
    ]
    assert len(problems(moved, papers)) == 1


def test_a_planted_wrong_mark_or_count_is_found(papers) -> None:
    enfr = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text(encoding="utf-8"))
    assert len(enfr["tables"]["significance"]["paper"]["matrix"]) == 7
    assert matrix_problems(enfr, papers) == []
    enfr["tables"]["significance"]["paper"]["matrix"][2] = "++.=-=+"  # c against g: the paper has '='
    assert len(matrix_problems(enfr, papers)) == 1
    fig10 = yaml.safe_load((REPO / "config.iwslt14_fig10.yaml").read_text(encoding="utf-8"))
    assert problems(fig10, papers) == []
    fig10["stability_map"]["paper"]["post_ln"]["diverged"] = 6  # the paper: 7 out of 15
    assert problems(fig10, papers) == [
        "stability_map.paper.post_ln.diverged: 6.0 is not in Liu et al. 2020a (Admin), Figure 10"
    ]
