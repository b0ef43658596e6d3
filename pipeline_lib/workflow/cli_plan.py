"""``plan``: what a config is about to submit, read off Snakemake's own dry run.

    python -m pipeline_lib plan --configfile config.wmt14_en_fr.yaml [more.yaml ...]

runs ``snakemake -n all --configfile ...`` in the current directory and prints, per rule, the number
of jobs, the GPUs and wall time they request, and the GPU-hours that adds up to
(sum over jobs of ``gpu x runtime``, as the configured resources ask SLURM for them: an upper bound
on what the jobs use, since ``runtime`` is a time limit). Jobs already done are not counted.
When no job requests a GPU (``gpu: 0`` in the config's resources, ``smoke: {gpu: false}``, or
``--profile profiles/local``, whose set-resources pin the GPU rules to 0), the table gives CPU
core-hours instead (``threads x runtime``).

Then one row per experiment: its training job (GPUs x max tokens per GPU x update_freq) and the
estimated peak memory per GPU. With a card (the config's ``card: {memory_gb: ...}``, or
``--gpu-memory-gb``) the jobs are shaped for it (pipeline_lib/workflow/card_shape.py: the recipe's tokens
per update, exactly) and each is priced in GPU-hours from the training rate measured on that card
(pipeline_lib/workflow/gpu_cost.py), beside the runtime cap's bound. ``--experiments-only`` prints
only that table, without the dry run.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pipeline_lib.atomic import write_text
from pipeline_lib.errors import ConfigError
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.gpu_cost import (
    Rate,
    binarized_target_tokens,
    epoch_target_tokens,
    flops_per_target_token,
    gpu_hours,
    load_rates,
    pick_rate,
)
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
    p.add_argument(
        "--experiments-only",
        action="store_true",
        help="only the per-experiment table (training shapes, memory, GPU-hours): no snakemake dry run",
    )
    p.add_argument(
        "--gpu-memory-gb",
        type=float,
        help="shape the training jobs for cards of this memory (the config's card.memory_gb, set for this plan)",
    )


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="plan-") as tmp:
        configfiles = list(args.configfile)
        if args.gpu_memory_gb is not None:  # one more config file: snakemake merges it like the others
            card = Path(tmp) / "card.yaml"
            write_text(card, yaml.safe_dump({"card": {"memory_gb": args.gpu_memory_gb}}))
            configfiles.append(str(card))
        return _plan(args, configfiles)


def _plan(args: argparse.Namespace, configfiles: list[str]) -> int:
    plan = check([Path(f) for f in configfiles], Path("."))  # a located error before snakemake's generic one
    if args.experiments_only:
        print(render_batches(plan))
        return 0
    snakemake = Path(sys.executable).parent / "snakemake"
    profile = ["--profile", args.profile] if args.profile else []
    files = ["--configfile", *configfiles]  # last: it takes every word after it as a file
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
    """(GPUs, max tokens per GPU, update_freq, target tokens per update) of an experiment's training job,
    shaped for the config's card when it names one; a CPU job (gpu 0 or unset) counts as one worker."""
    gpus = int(plan.resources(name, "train").get("gpu") or 0)
    recipe = plan.train_recipe(name)
    max_tokens, update_freq = int(recipe["max_tokens"]), int(recipe.get("update_freq", 1))
    return gpus, max_tokens, update_freq, max(gpus, 1) * max_tokens * update_freq


def estimated_memory_gb(plan: Plan, name: str) -> float:
    """Peak training memory per GPU of an experiment's job (:meth:`Plan.memory_estimate_gb`)."""
    _, max_tokens, update_freq, _ = effective_batch(plan, name)
    return plan.memory_estimate_gb(name, max_tokens, update_freq)


@dataclass(frozen=True)
class Cost:
    """An experiment's training: GPU-hours from a measured rate (None: no rate or unknown tokens), and
    the runtime cap's bound (GPUs x runtime)."""

    tokens: float | None
    estimate_gpu_hours: float | None
    rate: Rate | None
    requested_gpu_hours: float


def training_cost(plan: Plan, name: str) -> Cost:
    gpus, max_tokens, _, per_update = effective_batch(plan, name)
    resources = plan.resources(name, "train")
    requested = gpus * float(resources.get("runtime") or 0) / 60
    recipe, exp = plan.recipe(name), plan.experiments[name]
    tokens: float | None
    if recipe.get("max_update"):
        tokens = float(recipe["max_update"]) * per_update
    else:
        ds = plan.datasets[exp["dataset"]]
        bt = plan.backtranslation.get(exp.get("backtranslation") or "")
        binarized = binarized_target_tokens(Path(plan.bin_dir(name)), plan.exp_langs(name)[1])
        per_epoch = epoch_target_tokens(ds, bt, binarized)
        tokens = per_epoch * recipe.get("max_epoch", 1) if per_epoch is not None else None
    card = plan.card
    rate = None
    if card is not None and gpus:
        rate = pick_rate(
            load_rates(),
            memory_gb=card.memory_gb,
            name=card.name,
            d_model=plan.dims(name)[0],
            max_tokens=max_tokens,
            precision=recipe.get("amp", "none"),
        )
    estimate = None
    if rate is not None and tokens is not None:
        d_model, ffn_dim, _ = plan.dims(name)
        vocab = plan.vocab_size(name)
        flops = flops_per_target_token(exp["encoder_layers"], exp["decoder_layers"], d_model, ffn_dim, vocab)
        estimate = gpu_hours(tokens, flops, rate)
    return Cost(tokens, estimate, rate, requested)


def _shape(gpus: int, max_tokens: int, update_freq: int) -> str:
    return f"{gpus} x {max_tokens:,} x {update_freq}"


def render_batches(plan: Plan) -> str:
    card = plan.card
    lines = [
        "Training job per experiment: GPUs x max tokens per GPU x update_freq (the tokens per update are",
        "the recipe's; an upper bound, batches are filled up to max tokens), the estimated peak training",
        "memory per GPU (weights, gradients and Adam in fp32 + activations + logits, fused CUDA attention;",
        "the CUDA context and allocator slack come on top; pipeline_lib/model/memory_estimate.py)",
    ]
    if card is None:
        lines += [
            "as the recipes and resources state it. Name a card (`card: {memory_gb: 80}` in a config, or",
            "`plan --gpu-memory-gb 80`) to shape the jobs for it and price them from measured rates.",
            "",
            "| experiment | GPUs | max tokens per GPU | update_freq | tokens per update | memory per GPU |",
            "| :--- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in plan.experiments:
            gpus, max_tokens, update_freq, total = effective_batch(plan, name)
            memory = estimated_memory_gb(plan, name)
            lines.append(
                f"| {name} | {gpus} | {max_tokens:,} | {update_freq} | {total:,} | {memory:.1f} GB |"
            )
        return "\n".join(lines) + "\n"
    lines += [
        f"shaped for a {card.memory_gb:g} GB card (usable {card.usable_gb:.1f} GB, {card.gpus_per_node} GPUs",
        "per node; pipeline_lib/workflow/card_shape.py), and the training GPU-hours priced from the rate",
        "measured on that card (pipeline_lib/workflow/gpu_cost.py) beside the runtime cap's upper bound",
        "(GPUs x runtime).",
        "",
        "| experiment | authors' shape | shape for the card | tokens per update | memory per GPU "
        "| tokens trained | GPU-hours (measured rate) | GPU-hours (runtime cap) | rate from |",
        "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :--- |",
    ]
    total_estimate, total_cap, unpriced = 0.0, 0.0, []
    for name in plan.experiments:
        authors = plan.authors_shape(name)
        gpus, max_tokens, update_freq, per_update = effective_batch(plan, name)
        cost = training_cost(plan, name)
        total_cap += cost.requested_gpu_hours
        if cost.estimate_gpu_hours is None:
            unpriced.append(name)
        else:
            total_estimate += cost.estimate_gpu_hours
        lines.append(
            f"| {name} | {_shape(authors.gpus, authors.max_tokens, authors.update_freq)} "
            f"| {_shape(gpus, max_tokens, update_freq)} | {per_update:,} "
            f"| {estimated_memory_gb(plan, name):.1f} GB "
            f"| {'-' if cost.tokens is None else f'{cost.tokens / 1e9:,.2f}B'} "
            f"| {'-' if cost.estimate_gpu_hours is None else f'{cost.estimate_gpu_hours:,.0f}'} "
            f"| {cost.requested_gpu_hours:,.0f} | {'-' if cost.rate is None else cost.rate.label()} |"
        )
    lines.append(f"| **train total** | | | | | | **{total_estimate:,.0f}** | **{total_cap:,.0f}** | |")
    if unpriced:
        lines += [
            "",
            f"Not priced (no measured rate for this card or precision, or tokens unknown): {', '.join(unpriced)}.",
        ]
    return "\n".join(lines) + "\n"
