"""`python -m pipeline_lib <stage>`: one subcommand per pipeline stage.

Each stage lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> int``. Modules are imported only when their subcommand runs, so
``--help`` stays fast and a heavy import (torch) is paid only by stages that need it.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys

from pipeline_lib.atomic import WriteError, is_write_failure
from pipeline_lib.errors import PipelineError

EXIT_USAGE = 2  # bad input, config or file: fix it and rerun
EXIT_WRITE_FAILED = 74  # sysexits' EX_IOERR: disk full, quota, permission; free space and rerun

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "download": ("pipeline_lib.data.cli_download", "download and extract corpora (HTTP with resume)"),
    "prepare-demo": ("pipeline_lib.data.cli_demo", "build the embedded Bible demo corpus"),
    "prepare-ding": ("pipeline_lib.data.cli_ding", "build the Debian Ding De-En corpus"),
    "preprocess": ("pipeline_lib.data.cli_preprocess", "Moses normalize/tokenize and clean"),
    "learn-bpe": ("pipeline_lib.data.cli_subword", "learn joint BPE or SentencePiece"),
    "apply-bpe": ("pipeline_lib.data.cli_subword", "apply BPE or SentencePiece"),
    "binarize": ("pipeline_lib.data.cli_binarize", "build the vocabulary and memory-mapped ids"),
    "bt-mix": ("pipeline_lib.backtranslation.mix", "mix real and back-translated data (upsampled, tagged)"),
    "profile": ("pipeline_lib.train.cli_profile", "Admin profiling: write the omega profile"),
    "train": ("pipeline_lib.train.cli", "train a model (DDP, AMP, exact resume)"),
    "average": ("pipeline_lib.train.cli_average", "average the last N epoch checkpoints"),
    "translate": ("pipeline_lib.decode.cli", "beam search / greedy / sampling"),
    "score": ("pipeline_lib.evaluate.cli_score", "BLEU, TER, chrF, METEOR with signatures"),
    "significance": ("pipeline_lib.evaluate.cli_significance", "paired bootstrap resampling"),
    "analyze": ("pipeline_lib.evaluate.cli_analyze", "fine-grained analysis (Figure 3)"),
    "report": ("pipeline_lib.report.cli", "render results tables and plots"),
    "check-config": (
        "pipeline_lib.workflow.cli_check_config",
        "validate config files (file:line of any problem)",
    ),
    "plan": ("pipeline_lib.workflow.cli_plan", "jobs and GPU-hours a config would submit (snakemake -n)"),
    "export": ("pipeline_lib.export.cli", "a checkpoint as a fairseq checkpoint or a CTranslate2 model"),
}


def _load(name: str):
    module_name, _ = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    # A module may serve several subcommands (learn-bpe / apply-bpe).
    hook = getattr(module, "commands", None)
    if hook is not None:
        return hook()[name]
    return module.add_arguments, module.run


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline_lib", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="STAGE")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text)
        if name == selected:
            add_arguments, run = _load(name)
            add_arguments(sp)
            sp.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    selected = next((a for a in argv if not a.startswith("-")), None)
    if selected not in SUBCOMMANDS:
        selected = None
    parser = build_parser(selected)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except WriteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        if not is_write_failure(exc):
            raise
        # not through atomic.py (an append-only log, a library's own files): name what we know
        code = errno.errorcode.get(exc.errno or 0, "?")
        print(
            f"error: {exc.filename or 'a write'}: {exc.strerror} ({code}); earlier outputs are kept",
            file=sys.stderr,
        )
        return EXIT_WRITE_FAILED
