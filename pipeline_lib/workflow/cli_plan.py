"""``plan``: what a config is about to submit, read off Snakemake's own dry run.

    python -m pipeline_lib plan --configfile config.wmt14_en_fr.yaml [more.yaml ...]

runs ``snakemake -n all --configfile ...`` in the current directory and prints, per rule, the number
of jobs, the GPUs and wall time they request, and the GPU-hours that adds up to
(sum over jobs of ``gpu x runtime``, as the configured resources ask SLURM for them: an upper bound
on what the jobs use, since ``runtime`` is a time limit). Jobs already done are not counted.
When no job requests a GPU (``gpu: 0`` in the config's resources, ``smoke: {gpu: false}``, or
``--profile profiles/local``, whose set-resources pin the GPU rules to 0), the table gives CPU
core-hours instead (``threads x runtime``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_lib.errors import ConfigError
from pipeline_lib.model.memory_estimate import Recipe as MemoryRecipe
from pipeline_lib.model.memory_estimate import Shape, estimate_training_memory
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.plan import Plan

_JOB = re.compile(r"^(?:local)?rule (\w+):\n((?:[ \t]+.*\n?)*)", re.M)
_RESOURCES = re.compile(r"^\s+resources: (.*)$", re.M)
_THREADS = re.compile(r"^\s+threads: (\d+)$", re.M)  # printed only where a job has more than one
# A dry run caps each job's threads at --cores (default 1): this lets the configured numbers through.
DRY_RUN_CORES = 1024


@dataclass
class RuleSummary:
    jobs: int = 0
    gpu_hours: float = 0.0
    runtime_hours: float = 0.0
    core_hours: float = 0.0
    gpus: set[int] = field(default_factory=set)
    threads: set[int] = field(default_factory=set)


def parse_dry_run(output: str) -> dict[str, RuleSummary]:
    """{rule: summary} of the jobs a ``snakemake -n`` printed (the ``all`` target excluded)."""
    rules: dict[str, RuleSummary] = defaultdict(RuleSummary)
    for job in _JOB.finditer(output):
        rule, body = job.group(1), job.group(2)
        if rule == "all":
            continue
        resources = {}
        m = _RESOURCES.search(body)
        if m:
            for item in m.group(1).split(", "):
                key, _, value = item.partition("=")
                resources[key] = value
        gpu = int(resources.get("gpu", 0) or 0)
        runtime_min = float(resources.get("runtime", 0) or 0)
        threads_match = _THREADS.search(body)
        threads = int(threads_match.group(1)) if threads_match else 1
        summary = rules[rule]
        summary.jobs += 1
        summary.gpus.add(gpu)
        summary.threads.add(threads)
        summary.runtime_hours += runtime_min / 60
        summary.gpu_hours += gpu * runtime_min / 60
        summary.core_hours += threads * runtime_min / 60
    return dict(rules)


def uses_gpus(rules: dict[str, RuleSummary]) -> bool:
    return any(g > 0 for s in rules.values() for g in s.gpus)


def render(rules: dict[str, RuleSummary], title: str) -> str:
    """GPU-hours per rule; CPU core-hours where no job requests a GPU (all GPU-hours would be 0)."""
    gpu = uses_gpus(rules)
    lines = [f"{title}", ""]
    if not gpu:
        lines += ["No job requests a GPU: CPU core-hours (threads x runtime) instead of GPU-hours.", ""]
    lines += [
        "| rule | jobs | GPUs per job | GPU-hours requested |"
        if gpu
        else "| rule | jobs | threads per job | core-hours requested |",
        "| :--- | ---: | ---: | ---: |",
    ]
    for rule, s in rules.items():
        shape = "/".join(str(n) for n in sorted(s.gpus if gpu else s.threads))
        lines.append(f"| {rule} | {s.jobs} | {shape} | {_hours(s.gpu_hours if gpu else s.core_hours, gpu)} |")
    total_jobs = sum(s.jobs for s in rules.values())
    total = sum(s.gpu_hours if gpu else s.core_hours for s in rules.values())
    lines.append(f"| **total** | **{total_jobs}** | | **{_hours(total, gpu)}** |")
    return "\n".join(lines) + "\n"


def _hours(h: float, gpu: bool) -> str:
    # GPU-hours in whole hours (cluster scale); a CPU plan's jobs are often minutes, which "0" would hide.
    return f"{h:,.0f}" if gpu else f"{h:,.1f}"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", nargs="+", required=True, help="config file(s), as given to snakemake")
    p.add_argument("--target", default="all", help="snakemake target (default: all)")
    p.add_argument(
        "--profile",
        help="the snakemake profile the run will use (profiles/local pins GPU rules to 0: core-hours)",
    )


def run(args: argparse.Namespace) -> int:
    plan = check(
        [Path(f) for f in args.configfile], Path(".")
    )  # a located error before snakemake's generic one
    snakemake = Path(sys.executable).parent / "snakemake"
    profile = ["--profile", args.profile] if args.profile else []
    files = ["--configfile", *args.configfile]  # last: it takes every word after it as a file
    exe = str(snakemake) if snakemake.exists() else "snakemake"
    cmd = [exe, "-n", args.target, *profile, "--cores", str(DRY_RUN_CORES), *files]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    rules = parse_dry_run(proc.stdout)
    print(render(rules, f"`snakemake {' '.join(['-n', args.target, *profile, *files])}`"))
    print(render_batches(plan))
    return 0


def effective_batch(plan: Plan, name: str) -> tuple[int, int, int, int]:
    """(GPUs, max tokens per GPU, update_freq, target tokens per update) of an experiment's training;
    a CPU job (gpu 0 or unset) counts as one worker."""
    recipe = plan.recipe(name)
    gpus = int(plan.resources(name, "train").get("gpu") or 0)
    max_tokens, update_freq = recipe["max_tokens"], recipe.get("update_freq", 1)
    return gpus, max_tokens, update_freq, max(gpus, 1) * max_tokens * update_freq


def estimated_memory_gb(plan: Plan, name: str) -> float:
    """Peak training memory per GPU of an experiment (``pipeline_lib.model.memory_estimate``) under its
    recipe's dropouts, ``amp`` and ``update_freq``, with CUDA's fused attention; the vocabulary taken
    as the BPE merge count or the SentencePiece size (the joint vocabulary is within a few hundred
    types of it)."""
    exp, recipe = plan.experiments[name], plan.recipe(name)
    subword = plan.datasets[exp["dataset"]].get("subword", {})
    shape = Shape(
        exp["encoder_layers"],
        exp["decoder_layers"],
        *plan.dims(name),
        vocab=int(subword.get("merges") or subword.get("vocab_size") or 32000),
        residual=exp.get("residual", "post_ln"),
    )
    default = MemoryRecipe()  # ModelConfig's and TrainConfig's defaults (tests/model/test_memory_estimate.py)
    training = MemoryRecipe(
        dropout=recipe.get("dropout", default.dropout),
        attention_dropout=recipe.get("attention_dropout", default.attention_dropout),
        activation_dropout=recipe.get("activation_dropout", default.activation_dropout),
        amp=recipe.get("amp", default.amp),
    )
    return estimate_training_memory(
        shape,
        recipe["max_tokens"],
        training,
        checkpointing=bool(recipe.get("checkpoint_activations")),
        update_freq=int(recipe.get("update_freq", 1)),
    ).total_gb


def render_batches(plan: Plan) -> str:
    lines = [
        "Effective batch per experiment (max tokens x update_freq x GPUs, an upper bound: batches",
        "are filled up to max tokens), and the estimated peak training memory per GPU",
        "(weights, gradients and Adam in fp32 + activations + logits, fused CUDA attention; the CUDA",
        "context and allocator slack, ~1 GB, come on top; pipeline_lib/model/memory_estimate.py):",
        "",
        "| experiment | GPUs | max tokens per GPU | update_freq | tokens per update | memory per GPU |",
        "| :--- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in plan.experiments:
        gpus, max_tokens, update_freq, total = effective_batch(plan, name)
        memory = estimated_memory_gb(plan, name)
        lines.append(f"| {name} | {gpus} | {max_tokens:,} | {update_freq} | {total:,} | {memory:.1f} GB |")
    return "\n".join(lines) + "\n"
