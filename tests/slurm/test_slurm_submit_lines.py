"""The sbatch lines for the three training shapes: 1 GPU, 8 GPUs on one node, 2 nodes x 8 GPUs.

1. pipeline_lib.slurm_launch.sbatch_line (the plugin's own submit-string code) gives the documented
   lines for the profile's train settings.
2. Snakemake with a test copy of profiles/slurm really submits those lines for a `train` rule: the
   lines are read back from its log. This node has no GPUs, so sbatch rejects them, and the test
   checks that the rejection is SLURM's "node configuration not available" (the request was parsed
   and scheduled against the node) rather than an option error.
3. `sbatch --test-only` accepts the same lines with the GPU request replaced by CPUs and scaled to
   this node (1 node, 2 CPUs); the 2-node shape is rejected for want of a second node.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
from slurm_helpers import REPO, make_test_profile, snakemake_cmd

from pipeline_lib.slurm_launch import PROFILE_TRAIN_RESOURCES, TRAINING_SHAPES, TrainShape, sbatch_line

# The documented lines (docs/slurm.md / profiles/slurm). Placeholders stand for per-run values.
EXPECTED = {
    "1gpu": "sbatch --parsable --job-name '<run_uuid>' --output '<slurm_logdir>/rule_train/exp_1gpu/%j.log' "
    "--export=ALL --comment rule_train_wildcards_exp_1gpu   -p gpu -t 2880 --mem 64000 --requeue "
    "--cpus-per-gpu=8 --signal=TERM@300 -D '<workdir>' --gpus=a100:1",
    "8gpu": "sbatch --parsable --job-name '<run_uuid>' --output '<slurm_logdir>/rule_train/exp_8gpu/%j.log' "
    "--export=ALL --comment rule_train_wildcards_exp_8gpu   -p gpu -t 4320 --mem 256000 --requeue "
    "--cpus-per-gpu=8 --signal=TERM@300 -D '<workdir>' --gpus=a100:8",
    "2x8gpu": "sbatch --parsable --job-name '<run_uuid>' --output '<slurm_logdir>/rule_train/exp_2x8gpu/%j.log' "
    "--export=ALL --comment rule_train_wildcards_exp_2x8gpu   -p gpu -t 10080 --mem 256000 --nodes=2 "
    "--requeue --ntasks-per-node=8 --cpus-per-gpu=8 --signal=TERM@300 -D '<workdir>' --gpus=a100:16",
}
LAUNCHERS = {
    "1gpu": "python -m pipeline_lib",
    "8gpu": "torchrun --standalone --nproc-per-node=8 -m pipeline_lib",
    "2x8gpu": "srun --nodes=2 --ntasks-per-node=8 --ntasks=16 --kill-on-bad-exit=1 python -m pipeline_lib",
}

# slurmctld's rejection of a parsed request this node cannot satisfy (option errors look different:
# "unrecognized option", exit status 255). One node: 16 tasks over 2 nodes exceed its CPUs
# (EnforcePartLimits=ALL rejects it at submission); the single-node shapes lack the GPUs.
REJECTION = {
    "1gpu": "Requested node configuration is not available",
    "8gpu": "Requested node configuration is not available",
    "2x8gpu": "More processors requested than permitted",
}

SNAKEFILE = textwrap.dedent(
    """
    SHAPES = {shapes!r}
    localrules: all
    rule all:
        input: expand("out/{{exp}}.done", exp=["exp_" + s for s in SHAPES])
    rule train:
        output: "out/{{exp}}.done"
        resources:
            gpu=lambda wc: SHAPES[wc.exp[4:]].get("gpu"),
            nodes=lambda wc: SHAPES[wc.exp[4:]].get("nodes"),
            tasks_per_node=lambda wc: SHAPES[wc.exp[4:]].get("tasks_per_node"),
            mpi=lambda wc: SHAPES[wc.exp[4:]].get("mpi"),
            runtime=lambda wc: SHAPES[wc.exp[4:]]["runtime"],
            mem_mb=lambda wc: SHAPES[wc.exp[4:]]["mem_mb"],
        shell: "touch {{output}}"
    """
)


@pytest.mark.parametrize("shape", list(TRAINING_SHAPES))
def test_documented_lines_are_the_plugins(shape):
    resources = {**PROFILE_TRAIN_RESOURCES, **TRAINING_SHAPES[shape]}
    assert sbatch_line(resources, wildcards=f"exp_{shape}") == EXPECTED[shape]
    assert TrainShape.from_resources(resources).launcher() == LAUNCHERS[shape]


def _profile_train_resources(profile_dir: Path) -> dict:
    import yaml

    return yaml.safe_load((profile_dir / "config.yaml").read_text())["set-resources"]["train"]


def test_snakemake_submits_the_documented_lines(tmp_path: Path, slurm_cluster):
    work = tmp_path / "wf"
    work.mkdir()
    # Memory and time scaled to this node, so that the only thing it lacks is the GPUs.
    shapes = {name: {**res, "mem_mb": 500, "runtime": 10} for name, res in TRAINING_SHAPES.items()}
    (work / "Snakefile").write_text(SNAKEFILE.format(shapes=shapes))
    profile = make_test_profile(tmp_path / "profile", slurm_cluster.partition, keep_gpu=True)
    proc = subprocess.run(
        [*snakemake_cmd(), "--profile", str(profile), "--jobs", "3", "all"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, "a GPU job was accepted by a node without GPUs?\n" + log[-3000:]
    run_uuid = re.search(r"SLURM run ID: (\S+)", log).group(1)
    calls = re.findall(r"The error message was '([^']*)'\.\s+sbatch call:\s+(sbatch .*)", log)
    assert len(calls) == 3, log[-5000:]
    logdir = str(work / ".snakemake" / "slurm_logs")
    profile_train = _profile_train_resources(profile)
    seen = set()
    for error, call in calls:
        submitted = call.split(' --wrap="', 1)[0]
        shape = re.search(r"rule_train_wildcards_exp_(\w+)", submitted).group(1)
        assert REJECTION[shape] in error, error
        assert "Memory specification" not in error, error
        expected = sbatch_line(
            {**profile_train, **shapes[shape]},
            wildcards=f"exp_{shape}",
            workdir=str(work),
            run_uuid=run_uuid,
            slurm_logdir=logdir,
        )
        assert submitted == expected
        # Same line as documented, up to the test cluster's partition and the per-run values.
        documented = (
            EXPECTED[shape]
            .replace("-p gpu", f"-p {slurm_cluster.partition}")
            .replace(f"-t {TRAINING_SHAPES[shape]['runtime']} ", "-t 10 ")
            .replace(f"--mem {TRAINING_SHAPES[shape]['mem_mb']} ", "--mem 500 ")
        )
        normalised = (
            submitted.replace(run_uuid, "<run_uuid>")
            .replace(logdir, "<slurm_logdir>")
            .replace(str(work), "<workdir>")
        )
        # (shlex quotes the placeholders but not the plain paths they stand for)
        assert normalised.replace("'", "") == documented.replace("'", "")
        seen.add(shape)
    assert seen == set(TRAINING_SHAPES)


def _cpu_scaled(line: str, nodes: int | None) -> list[str]:
    """The documented line as a `--test-only` submission that fits a GPU-less 2-CPU node."""
    args = shlex.split(line)[1:]
    out = []
    for a in args:
        if (
            a.startswith(("--gpus=", "--cpus-per-gpu=", "--ntasks-per-node=", "--nodes="))
            or a == "--parsable"
        ):
            continue
        out.append(a)
    out = [x.replace("<workdir>", "/tmp").replace("<slurm_logdir>", "/tmp/slurm-test-only") for x in out]
    # memory and time scaled down to the test node
    out[out.index("--mem") + 1] = "500"
    out[out.index("-t") + 1] = "10"
    out[out.index("-p") + 1] = os.environ.get("DEEPNMT_SLURM_PARTITION", "debug")
    extra = ["--cpus-per-task=1", "--ntasks-per-node=2"] if nodes else ["--cpus-per-task=2"]
    if nodes:
        extra.append(f"--nodes={nodes}")
    return ["sbatch", "--test-only", *out, *extra, "--wrap", "true"]


@pytest.mark.parametrize(
    ("shape", "nodes", "accepted"),
    [("1gpu", None, True), ("8gpu", None, True), ("2x8gpu", 1, True), ("2x8gpu", 2, False)],
)
def test_sbatch_test_only_cpu_scaled(shape, nodes, accepted, slurm_cluster):
    proc = subprocess.run(_cpu_scaled(EXPECTED[shape], nodes), capture_output=True, text=True, timeout=30)
    message = proc.stdout + proc.stderr
    if accepted:
        assert proc.returncode == 0 and "to start at" in message, message
    else:
        assert proc.returncode == 1, message
        assert REJECTION[shape] in message, message


@pytest.mark.parametrize("shape", list(TRAINING_SHAPES))
def test_sbatch_test_only_full_gpu_lines_are_parsed_but_unsatisfiable_here(shape, slurm_cluster):
    args = shlex.split(EXPECTED[shape])[1:]
    args = [a for a in args if a != "--parsable"]
    args = [a.replace("<workdir>", "/tmp").replace("<slurm_logdir>", "/tmp/slurm-test-only") for a in args]
    args[args.index("-p") + 1] = slurm_cluster.partition
    proc = subprocess.run(["sbatch", "--test-only", *args, "--wrap", "true"], capture_output=True, text=True)
    message = proc.stdout + proc.stderr
    # Option errors exit 255 with "unrecognized option"/"invalid"; a parsed request that no node
    # can satisfy is rejected by slurmctld with this message.
    assert proc.returncode == 1, message
    assert REJECTION[shape] in message, message
