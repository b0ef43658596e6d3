"""Snakemake's slurm executor against the local cluster, with a test copy of profiles/slurm.

Two rules: a CPU job (`prepare`) and a multi-process `train` job shaped like the multi-node
training jobs (mpi="srun", tasks_per_node=2 with resources read per experiment from the config),
whose shell launches its own srun: two gloo ranks that all-reduce through DistributedEnv.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

from slurm_helpers import REPO, make_test_profile, python_exe, snakemake_cmd

SNAKEFILE = textwrap.dedent(
    """
    from pipeline_lib.slurm_launch import TrainShape

    # As the workflow will do: a default training shape, overridden per experiment.
    TRAIN_DEFAULT = {{"runtime": 5, "mem_mb": 500}}
    EXPERIMENTS = {{"tiny": {{"resources": {{"train": {{"nodes": 1, "tasks_per_node": 2, "mpi": "srun"}}}}}}}}

    def train_res(wc):
        return {{**TRAIN_DEFAULT, **EXPERIMENTS[wc.exp]["resources"]["train"]}}

    localrules: all

    rule all:
        input: "out/tiny/ranks/rank0.json", "out/tiny/ranks/rank1.json"

    rule prepare:
        output: "out/{{exp}}/data.txt"
        log: "logs/prepare/{{exp}}.log"
        shell: "echo prepared $SLURM_JOB_ID > {{output}} 2> {{log}}"

    rule train:
        input: "out/{{exp}}/data.txt"
        output: "out/{{exp}}/ranks/rank0.json", "out/{{exp}}/ranks/rank1.json"
        log: "logs/train/{{exp}}.log"
        resources:
            nodes=lambda wc: train_res(wc).get("nodes"),
            tasks_per_node=lambda wc: train_res(wc).get("tasks_per_node"),
            mpi=lambda wc: train_res(wc).get("mpi"),
            runtime=lambda wc: train_res(wc)["runtime"],
            mem_mb=lambda wc: train_res(wc)["mem_mb"],
        params:
            launch=lambda wc, resources: TrainShape.from_resources(resources).launcher(
                python="{python}", module="pipeline_lib.train.dist_check"
            ),
        shell: "{{params.launch}} --device cpu --out-dir out/{{wildcards.exp}}/ranks --timeout 60 > {{log}} 2>&1"
    """
)


def test_snakemake_runs_two_rules_through_sbatch(tmp_path: Path, slurm_cluster):
    work = tmp_path / "wf"
    work.mkdir()
    (work / "Snakefile").write_text(SNAKEFILE.format(python=python_exe()))
    profile = make_test_profile(tmp_path / "profile", slurm_cluster.partition)
    proc = subprocess.run(
        [*snakemake_cmd(), "--profile", str(profile), "--jobs", "2", "all"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=400,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]

    # Every job went through sbatch: one SLURM job id per rule, and the plugin's log for each.
    submitted = dict(re.findall(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)", log))
    assert len(submitted) == 2, log[-4000:]
    slurm_logs = sorted((work / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert {p.stem for p in slurm_logs} == set(submitted), slurm_logs
    assert {p.parent.parent.name if p.parent.name == "tiny" else p.parent.name for p in slurm_logs} == {
        "rule_prepare",
        "rule_train",
    }

    # The CPU job really ran inside a SLURM job (it saw its own job id).
    prepared = (work / "out" / "tiny" / "data.txt").read_text().split()
    assert prepared[0] == "prepared" and prepared[1] in submitted

    # The multi-process job: its own srun started 2 ranks that agree.
    ranks = [json.loads((work / "out" / "tiny" / "ranks" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert {r["world_size"] for r in ranks} == {2}
    assert {r["launcher"] for r in ranks} == {"srun"}
    assert [r["sum"] for r in ranks] == [3.0, 3.0]
