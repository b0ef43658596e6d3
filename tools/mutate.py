"""`make mutate`: mutmut over the core modules, one module at a time, resumable; then a score table.

    python tools/mutate.py run [MODULE ...]   # all modules (quickest first) when none is named
    python tools/mutate.py run --survivors M  # re-run M's survivors, e.g. after adding a test
    python tools/mutate.py run --remap ...    # re-map tests to functions first (a module gained some)
    python tools/mutate.py summary [--compact]  # markdown table from mutmut's state in mutants/

mutmut (configured in pyproject.toml, [tool.mutmut]) keeps one verdict per mutant in
mutants/<file>.meta. `run` passes mutmut only the mutants of the named module that have no verdict
yet, so an interrupted run resumes where it stopped and a finished module costs nothing. A mutant
named on mutmut's command line is always re-run, which is also how a survivor is re-checked after a
test is added: `mutmut run <mutant name>`.

Every survivor is judged in tools/mutation_survivors.txt: equivalent (no test can tell it from the
original; the score leaves it out) or a gap, named with the fast test added to kill it. Score:
killed / (mutants - equivalent), timeouts counted as not killed. A mutant judged equivalent is never
run, also when it was judged by reading before its first run (the table says how many were).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
SURVIVORS_FILE = ROOT / "tools" / "mutation_survivors.txt"
TIMES_FILE = MUTANTS / "module_wall_times.json"  # with the state it describes: lost together
MUTMUT = Path(sys.executable).parent / "mutmut"  # the venv's, also when the venv is not activated

# Module name -> source file, quickest first as measured on 2 cores (the order `run` without a name uses);
# search last: its tests are the slowest fast tests, hours for all its mutants.
MODULES: dict[str, str] = {
    "schedule": "pipeline_lib/train/schedule.py",
    "average": "pipeline_lib/train/average.py",
    "loss": "pipeline_lib/train/loss.py",
    "admin": "pipeline_lib/model/admin.py",
    "metrics": "pipeline_lib/evaluate/metrics.py",
    "significance": "pipeline_lib/evaluate/significance.py",
    "moses": "pipeline_lib/data/moses.py",
    "subword": "pipeline_lib/data/subword.py",
    "search": "pipeline_lib/decode/search.py",
    # Second round (modules whose bugs change a result rather than raise), in the order they were first
    # run: the small, result-critical ones first. One shard per file; `stabilizers` names all of its files.
    "vocab": "pipeline_lib/data/vocab.py",
    "marks": "pipeline_lib/report/marks.py",
    "seed_groups": "pipeline_lib/report/seed_groups.py",
    "reference_scheme": "pipeline_lib/evaluate/reference_scheme.py",
    "compound_split": "pipeline_lib/evaluate/compound_split.py",
    "mix": "pipeline_lib/backtranslation/mix.py",
    "clean_segmented": "pipeline_lib/data/clean_segmented.py",
    "residual": "pipeline_lib/model/residual.py",
    "split_data": "pipeline_lib/train/split_data.py",
    "outputs": "pipeline_lib/decode/outputs.py",
    "decode_inputs": "pipeline_lib/decode/inputs.py",
    "indexed": "pipeline_lib/data/indexed.py",
    "binarize": "pipeline_lib/data/binarize.py",
    "run_identity": "pipeline_lib/train/run_identity.py",
    "validation": "pipeline_lib/train/validation.py",
    "batching": "pipeline_lib/train/batching.py",
    "build": "pipeline_lib/train/build.py",
    "update": "pipeline_lib/train/update.py",
    "translator": "pipeline_lib/decode/translator.py",
    "tables": "pipeline_lib/report/tables.py",
    "attention": "pipeline_lib/model/attention.py",
    "layers": "pipeline_lib/model/layers.py",
    "b2t": "pipeline_lib/model/stabilizers/b2t.py",
    "deepnorm": "pipeline_lib/model/stabilizers/deepnorm.py",
    "ds_init": "pipeline_lib/model/stabilizers/ds_init.py",
    "redraw": "pipeline_lib/model/stabilizers/redraw.py",
    "resi_dual": "pipeline_lib/model/stabilizers/resi_dual.py",
    "rezero": "pipeline_lib/model/stabilizers/rezero.py",
    "scaling": "pipeline_lib/model/stabilizers/scaling.py",
    "sub_ln": "pipeline_lib/model/stabilizers/sub_ln.py",
    "t_fixup": "pipeline_lib/model/stabilizers/t_fixup.py",
}

# A name that stands for several shards, run one after another.
GROUPS: dict[str, list[str]] = {
    "stabilizers": [name for name, source in MODULES.items() if "/stabilizers/" in source],
}

# mutmut's exit codes per verdict (mutmut/stats.py, status_by_exit_code, 3.8.1); unknown -> "suspicious".
STATUS_BY_EXIT_CODE: dict[int | None, str] = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    2: "interrupted",
    None: "not checked",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "type check",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "segfault",
    # mutmut's table says "segfault", but its runner sets RLIMIT_CPU (soft: SIGXCPU, -24; hard one second
    # later: SIGKILL): a run that outlives SIGXCPU (a multiprocessing pool in the tests) ends as -9.
    -9: "timeout",
}


def check_config() -> None:
    """Every module here must be one mutmut mutates, or its run would silently find no mutants."""
    from mutmut.configuration import config  # reads ./pyproject.toml as mutmut run will

    missing = sorted(set(MODULES.values()) - set(config().only_mutate))
    if missing:
        sys.exit(f"pyproject.toml [tool.mutmut] only_mutate lacks {missing} (tools/mutate.py MODULES)")


def module_prefix(source: str) -> str:
    """mutmut names a mutant <dotted module>.<function>__mutmut_<n>."""
    return source.removesuffix(".py").replace("/", ".") + "."


def verdicts(source: str) -> dict[str, int | None] | None:
    """Mutant name -> mutmut's exit code for one file, or None before mutmut generated its mutants."""
    meta = MUTANTS / (source + ".meta")
    if not meta.exists():
        return None
    return json.loads(meta.read_text("utf-8"))["exit_code_by_key"]


@dataclass(frozen=True)
class Judgement:
    kind: str  # "equivalent": no test can tell it from the original; "test": a fast test was added for it
    note: str  # why it is equivalent, or the test that kills it


def load_judgements() -> dict[str, Judgement]:
    """tools/mutation_survivors.txt: `<mutant name> equivalent|test <reason or test>` per line."""
    judgements: dict[str, Judgement] = {}
    if not SURVIVORS_FILE.exists():
        return judgements
    for number, line in enumerate(SURVIVORS_FILE.read_text("utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, kind, note = (line.split(maxsplit=2) + ["", ""])[:3]
        if kind not in ("equivalent", "test") or not note:
            sys.exit(f"{SURVIVORS_FILE}:{number}: expected `<mutant> equivalent|test <reason>`, got {line!r}")
        judgements[name] = Judgement(kind, note)
    return judgements


def load_times() -> dict[str, dict[str, float]]:
    return json.loads(TIMES_FILE.read_text("utf-8")) if TIMES_FILE.exists() else {}


def refresh_unmutated_copies() -> None:
    """mutmut copies the package into mutants/ once and re-copies only the files it mutates (when their
    mtime changes): bring every other file up to date, so a resumed run tests today's code."""
    from mutmut.configuration import config

    mutated = set(config().only_mutate)
    for source in sorted(ROOT.glob("pipeline_lib/**/*.py")):
        relative = source.relative_to(ROOT).as_posix()
        copy = MUTANTS / relative
        if relative in mutated or not copy.parent.exists():
            continue
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            shutil.copy2(source, copy)


def run_module(name: str, jobs: int, survivors: bool = False) -> None:
    source = MODULES[name]
    known = verdicts(source)
    if known is None:  # first run: mutmut generates the mutants; a glob selects this file's
        todo = [module_prefix(source) + "*"]
    else:
        retry = {None, 2} | ({0, 5, 33} if survivors else set())  # 0: survived, 5/33: no tests
        # judged equivalent (also before a first run, by reading it): a mutant no test can kill runs
        # every test that calls its function, minutes each for the model and decoding modules
        equivalent = {m for m, j in load_judgements().items() if j.kind == "equivalent"}
        todo = [mutant for mutant, code in known.items() if code in retry and mutant not in equivalent]
        if not todo:
            print(f"[mutate] {name}: all {len(known)} mutants have a verdict (rm -r mutants/ to start over)")
            return
    print(f"[mutate] {name}: {source}, {'all' if known is None else len(todo)} mutants to run", flush=True)
    refresh_unmutated_copies()
    start = time.monotonic()
    try:  # mutmut's command line, not its internals: its config and state stay its own
        subprocess.run([str(MUTMUT), "run", "--max-children", str(jobs), *todo], cwd=ROOT, check=True)
    finally:  # an interrupted run keeps its verdicts (mutmut saves each one), so count its time too
        elapsed = time.monotonic() - start
        times = load_times()
        kind = "first" if known is None or not survivors else "retry"  # first pass vs re-checks
        times.setdefault(name, {}).setdefault(kind, 0.0)
        times[name][kind] += elapsed
        MUTANTS.mkdir(exist_ok=True)
        TIMES_FILE.write_text(json.dumps(times, indent=1) + "\n", "utf-8")
    print(f"[mutate] {name}: {elapsed:.0f} s", flush=True)


@dataclass
class Row:
    mutants: int = 0
    killed: int = 0  # by the tests as they were
    killed_by_added: int = 0  # by a test added for that mutant (tools/mutation_survivors.txt)
    equivalent: int = 0
    survived: int = 0
    timeout: int = 0
    no_tests: int = 0
    other: int = 0
    unfinished: int = 0
    equivalent_unrun: int = 0  # of `equivalent`: judged by reading, never run (tools/mutation_survivors.txt)

    @property
    def score(self) -> str:
        judged = self.mutants - self.equivalent
        if self.unfinished:  # never a score for a module not fully run
            return "unfinished"
        return f"{100 * (self.killed + self.killed_by_added) / judged:.1f}%" if judged else "-"


def summary(compact: bool = False) -> None:
    """The per-module table; ``compact``: the README's rows (no survivors, no file column)."""
    judgements = load_judgements()
    times = load_times()
    if not compact:
        print(
            "| module | file | mutants | killed by the suite | equivalent | gap: test added | survived | timeout | no tests "
            "| score | wall (first run + re-checks) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    open_gaps: list[str] = []
    for name, source in MODULES.items():
        known = verdicts(source)
        if known is None:
            print(
                f"| {name} | not run | | | | | | |"
                if compact
                else f"| {name} | {source} | not run |" + " |" * 8
            )
            continue
        row = Row(mutants=len(known))
        for mutant, code in known.items():
            status = STATUS_BY_EXIT_CODE.get(code, "suspicious")
            judged = judgements.get(mutant)
            if judged is not None and judged.kind == "equivalent":
                row.equivalent += 1  # out of the score whatever mutmut said
                row.equivalent_unrun += status in ("not checked", "interrupted")
            elif status in ("not checked", "interrupted"):
                row.unfinished += 1
            elif status == "killed":
                if judged is not None:
                    row.killed_by_added += 1
                else:
                    row.killed += 1
            elif status == "survived":
                row.survived += 1
                open_gaps.append(mutant)
            elif status == "timeout":
                row.timeout += 1
            elif status == "no tests":
                row.no_tests += 1
                open_gaps.append(mutant)
            else:
                row.other += 1
                open_gaps.append(f"{mutant} ({status})")
        note = f" ({row.unfinished} not run)" if row.unfinished else ""
        if row.equivalent_unrun:
            note += f" ({row.equivalent_unrun} equivalent by reading, not run)"
        spent = times.get(name, {})
        wall = f"{spent.get('first', 0) / 60:.1f} + {spent.get('retry', 0) / 60:.1f} min" if spent else "-"
        if compact:
            done = row.mutants - row.unfinished
            mutants = f"{row.mutants} ({done} run, then stopped)" if row.unfinished else str(row.mutants)
            score = "no score: not finished" if row.unfinished else row.score
            print(
                f"| {name} | {mutants} | {row.killed} | {row.equivalent} | {row.killed_by_added} | {row.timeout} "
                f"| {score} | {wall} |"
            )
            continue
        print(
            f"| {name} | {source} | {row.mutants}{note} | {row.killed} | {row.equivalent} | {row.killed_by_added} "
            f"| {row.survived} | {row.timeout} | {row.no_tests} | {row.score} | {wall} |"
        )
    stale = sorted(m for m in judgements if not any(m.startswith(module_prefix(s)) for s in MODULES.values()))
    if stale:
        print(f"\n{SURVIVORS_FILE.name} names unknown mutants: {stale}")
    if open_gaps and not compact:
        print("\nSurvivors not judged yet (`mutmut show <name>`; equivalent, or add a test):")
        for mutant in open_gaps:
            print(f"  {mutant}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the unfinished mutants of the named modules (default: all)")
    run.add_argument("modules", nargs="*", metavar="MODULE", help=f"one of {', '.join([*MODULES, *GROUPS])}")
    run.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default: 2)")
    run.add_argument(
        "--remap",
        action="store_true",
        help="re-record which test calls which function first (after a mutated module gained functions)",
    )
    run.add_argument(
        "--survivors",
        action="store_true",
        help="also re-run survivors not judged equivalent (after adding tests)",
    )
    table = sub.add_parser("summary", help="the per-module table")
    table.add_argument("--compact", action="store_true", help="the README's rows only")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    check_config()
    unknown = [name for name in getattr(args, "modules", []) if name not in MODULES and name not in GROUPS]
    if unknown:
        parser.error(f"unknown module {unknown}: choose from {', '.join([*MODULES, *GROUPS])}")
    if args.command == "run":
        if args.remap:  # mutmut maps only new tests incrementally, never new functions
            (MUTANTS / "mutmut-stats.json").unlink(missing_ok=True)
        names = [shard for name in args.modules for shard in GROUPS.get(name, [name])]
        for name in names or list(MODULES):
            run_module(name, args.jobs, args.survivors)
    summary(compact=getattr(args, "compact", False))


if __name__ == "__main__":
    main()
