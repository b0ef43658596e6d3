"""The README stays short and points into docs/, and no relative link in either goes nowhere.

Links are checked as GitHub renders them: a relative target must exist in the checkout, and a
`#fragment` must be the GitHub slug of a heading in the target file. Links inside code (fenced blocks
and inline spans) are text, not links, and are skipped."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
MAX_README_LINES = 250

LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"(`+).*?\1", re.S)


def outside_fences(text: str) -> str:
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    return INLINE_CODE.sub("", outside_fences(text))


def github_slug(heading: str) -> str:
    """GitHub's heading anchor: lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file, with GitHub's -1, -2 suffixes for repeats."""
    seen: Counter[str] = Counter()
    found = set()
    for line in outside_fences(path.read_text()).splitlines():
        if m := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line):
            slug = github_slug(m.group(1).replace("`", ""))
            found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
            seen[slug] += 1
    return found


def relative_links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(path.read_text()))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move a topic into docs/"


def test_every_doc_is_linked_from_the_readme_and_exists():
    linked = {
        (README.parent / target.split("#", 1)[0]).resolve()
        for target in relative_links(README)
        if target.split("#", 1)[0].startswith("docs/")
    }
    assert linked, "README.md links no docs/ file"
    for target in linked:
        assert target.is_file(), f"README.md links {target.relative_to(REPO)}, which does not exist"
    unlinked = [doc.name for doc in DOCS if doc.resolve() not in linked]
    assert not unlinked, f"docs/ files the README's 'Where to go next' does not link: {unlinked}"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path):
    broken = []
    for target in relative_links(doc):
        file_part, _, fragment = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{fragment} in {dest.name}")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


# Paths in the repository that the docs name in code spans: a moved module or test must take its
# mention along. Globs and placeholders (`tests/model/stabilizers/test_*.py`, `<exp>`) are not paths.
REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:(?:tests|bench|pipeline_lib|workflow|profiles|tools|\.ci)/[\w./*{}<>-]*|config[\w.]*\.yaml)"
)


def repository_paths(text: str) -> set[str]:
    found = {m.rstrip(".") for m in REPO_PATH.findall(text)}
    return {m for m in found if not any(c in m for c in "*{}<>")}


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_named_exists(doc: Path):
    missing = sorted(m for m in repository_paths(doc.read_text()) if not (REPO / m).exists())
    assert not missing, f"{doc.relative_to(REPO)} names paths that do not exist: {missing}"


def _readme_config_rows() -> dict[str, list[str]]:
    rows = {}
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`config\.[\w.]+\.yaml`", cells[0]):
            rows[cells[0].strip("`")] = cells[2:]
    return rows


def _readme_gpu_hours() -> dict[str, str]:
    return {config: cells[0] for config, cells in _readme_config_rows().items()}


def test_readme_paper_configs_estimates_are_the_plans():
    """The README's measured-rate column is what `plan --gpu-memory-gb 80` / `141` estimates today."""
    for config, (_, estimates) in _readme_config_rows().items():
        got = []
        for memory_gb in ("80", "141"):
            proc = subprocess.run(
                [sys.executable, "-m", "pipeline_lib", "plan", "--experiments-only", "--configfile", config,
                 "--gpu-memory-gb", memory_gb],
                cwd=REPO, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            total = re.search(r"^\| \*\*train total\*\* \|(?: \|)* \*\*([\d,]+)\*\* \|", proc.stdout, re.M)
            assert total, proc.stdout[-3000:]
            got.append("not priced" if "Not priced" in proc.stdout else total.group(1))
        if "not priced" in estimates:
            assert got == ["not priced", "not priced"], (config, got)
        else:
            assert estimates == " / ".join(got), (config, estimates, got)


def test_readme_paper_configs_gpu_hours_are_the_plans():
    """The README's GPU-hours column is what `python -m pipeline_lib plan` adds up today."""
    rows = _readme_gpu_hours()
    assert len(rows) == 4, rows
    for config, hours in rows.items():
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline_lib", "plan", "--configfile", config],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        total = re.search(r"^\| \*\*total\*\* \| \*\*\d+\*\* \| +\| \*\*([\d,.]+)\*\* \|$", proc.stdout, re.M)
        assert total, proc.stdout[-3000:]
        assert hours == total.group(1), (config, hours, total.group(1))


def test_slugs_follow_github():
    """The anchors the docs use, worked out by hand from GitHub's rule."""
    assert github_slug("Paper scale: WMT'14 En-Fr and En-De, IWSLT'14 De-En") == (
        "paper-scale-wmt14-en-fr-and-en-de-iwslt14-de-en"
    )
    assert github_slug("Adding an experiment, rerunning a stage") == "adding-an-experiment-rerunning-a-stage"
    assert github_slug("Memory at depth, and activation checkpointing") == (
        "memory-at-depth-and-activation-checkpointing"
    )
