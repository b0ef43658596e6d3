"""The Snakemake side stays thin: rules wire files to `python -m pipeline_lib` calls, and the logic
lives in pipeline_lib/workflow (tested there)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

RULES = Path(__file__).resolve().parents[2] / "workflow" / "rules"


def python_functions(text: str) -> list[tuple[str, int]]:
    """(name, lines) of every top-level Python function in a .smk file (its rules are not Python)."""
    chunks = re.split(r"(?m)^(?=def |rule |use rule |checkpoint |localrules:|include:)", text)
    functions = []
    for chunk in chunks:
        if chunk.startswith("def "):
            tree = ast.parse(chunk)
            fn = tree.body[0]
            functions.append((fn.name, fn.end_lineno - fn.lineno + 1))
    return functions


def test_common_smk_is_validation_plan_and_input_functions():
    assert len((RULES / "common.smk").read_text().splitlines()) <= 200


# The two spec rules write the plan's own data (pipeline_lib/report/spec_file.py) with one call: a shell
# command would need the spec as a param, which Snakemake prints whole in every dry-run reason.
SPEC_WRITERS = {"report_spec", "curves_spec"}


def test_no_rule_runs_python_inline():
    for smk in sorted(RULES.glob("*.smk")):
        text = smk.read_text()
        for match in re.finditer(r"(?m)^\s+run:\s*$", text):
            rule = re.findall(r"(?m)^rule (\w+):", text[: match.start()])[-1]
            assert rule in SPEC_WRITERS, f"{smk.name}: rule {rule} has a run: block"
            body = text[match.end() :].split("\n\n", 1)[0].strip()
            assert body.startswith("write_spec(") and "\n" not in body, f"{rule}: more than one call"


def test_smk_functions_are_short():
    long = [
        f"{smk.name}:{name} ({n} lines)"
        for smk in sorted(RULES.glob("*.smk"))
        for name, n in python_functions(smk.read_text())
        if n > 15
    ]
    assert not long, long


def shell_commands(text: str) -> list[str]:
    """The command of every shell: block (its string lines joined)."""
    commands = []
    for block in re.findall(r"(?m)^    shell:\n((?:        .*\n?)+)", text):
        commands.append("".join(re.findall(r'"(.*?)"', block)))
    return commands


def test_every_shell_line_quotes_what_reaches_it():
    """Paths reach the shell through {..:q}; every other value through arguments quoted in Python."""
    commands = [c for smk in sorted(RULES.glob("*.smk")) for c in shell_commands(smk.read_text())]
    assert len(commands) >= 15, commands
    for command in commands:
        for field, quoted in re.findall(r"\{([a-z_.]+)(:q)?\}", command):
            kind = field.split(".")[0]
            # threads: an integer Snakemake resolves (kept out of params, which it then would not compare)
            assert kind in ("input", "output", "log", "params", "threads", "wildcards"), (
                f"{{{field}}} in {command!r}"
            )
            if kind not in ("params", "threads"):
                assert quoted, f"{{{field}}} is not quoted in {command!r}"
