"""Training job shapes on SLURM: the launcher a rule runs and the sbatch line the plugin submits.

A training job has one of three shapes, chosen per experiment by its resources
(``gpu``, ``nodes``, ``tasks_per_node``, ``mpi``; see profiles/slurm/config.yaml):

* one GPU:            ``python -m pipeline_lib train ...``
* N GPUs, one node:   ``torchrun --standalone --nproc-per-node=N -m pipeline_lib train ...``
* several nodes:      ``srun --nodes=M --ntasks-per-node=N ... python -m pipeline_lib train ...``
  (an ``mpi`` job: the SLURM plugin does not wrap it in its own ``srun -n1``, and its job step strips
  the allocation's SLURM_* task variables, so the srun flags must be explicit here.)

``sbatch_line`` asks snakemake-executor-plugin-slurm itself to build the submit command for given
resources, so the lines shown in the docs are the plugin's, not a copy of its logic.

    python -m pipeline_lib.slurm_launch    # prints the three canonical shapes
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pipeline_lib.errors import ConfigError

# The three canonical shapes of issue 7 (resources as a workflow rule would pass them).
TRAINING_SHAPES: dict[str, dict[str, Any]] = {
    "1gpu": {"gpu": 1, "runtime": 2880, "mem_mb": 64000},
    "8gpu": {"gpu": 8, "runtime": 4320, "mem_mb": 256000},
    "2x8gpu": {"gpu": 16, "nodes": 2, "tasks_per_node": 8, "mpi": "srun", "runtime": 10080, "mem_mb": 256000},
}
# What profiles/slurm sets for the train rule (cluster facts).
PROFILE_TRAIN_RESOURCES: dict[str, Any] = {
    "slurm_partition": "gpu",
    "gpu_model": "a100",
    "cpus_per_gpu": 8,
    "slurm_extra": "--signal=TERM@300",
}


def _positive_int(resources: Mapping[str, Any], key: str, default: int) -> int:
    value = resources.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"resources.{key}: expected a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True)
class TrainShape:
    gpus: int = 1  # GPUs in the whole job (0: CPU)
    nodes: int = 1
    tasks_per_node: int | None = None
    mpi: str | None = None

    @classmethod
    def from_resources(cls, resources: Mapping[str, Any]) -> TrainShape:
        gpus = _positive_int(resources, "gpu", 0)
        nodes = max(1, _positive_int(resources, "nodes", 1))
        tpn = _positive_int(resources, "tasks_per_node", 0) or None
        mpi = resources.get("mpi") or None
        if nodes > 1 and not mpi:
            raise ConfigError(
                f"resources: nodes={nodes} needs mpi='srun' (and tasks_per_node) so that the job launches "
                "one process per GPU on every node"
            )
        if mpi and tpn is None:
            raise ConfigError("resources.tasks_per_node is required with mpi (one task per GPU per node)")
        if mpi and gpus and gpus != nodes * tpn:
            raise ConfigError(
                f"resources: gpu={gpus} but nodes*tasks_per_node={nodes * tpn}; expected one GPU per task"
            )
        return cls(gpus=gpus, nodes=nodes, tasks_per_node=tpn, mpi=str(mpi) if mpi else None)

    @property
    def world_size(self) -> int:
        if self.mpi:
            return self.nodes * (self.tasks_per_node or 1)
        return max(1, self.gpus)

    def launcher(self, python: str = "python", module: str = "pipeline_lib") -> str:
        """Command prefix that runs ``-m <module>`` once per GPU (append ``train ...``)."""
        if self.mpi:
            return (
                f"srun --nodes={self.nodes} --ntasks-per-node={self.tasks_per_node} "
                f"--ntasks={self.world_size} --kill-on-bad-exit=1 {python} -m {module}"
            )
        if self.gpus > 1:
            return f"torchrun --standalone --nproc-per-node={self.gpus} -m {module}"
        return f"{python} -m {module}"


class _Resources(dict):
    """A dict that also answers attribute access, like Snakemake's job.resources."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e


def sbatch_line(
    resources: Mapping[str, Any],
    *,
    rule: str = "train",
    wildcards: str = "",
    threads: int = 1,
    requeue: bool = True,
    workdir: str = "<workdir>",
    run_uuid: str = "<run_uuid>",
    slurm_logdir: str = "<slurm_logdir>",
) -> str:
    """The ``sbatch`` command snakemake-executor-plugin-slurm submits for these resources.

    Everything but the ``--wrap="<snakemake job step command>"`` suffix. ``slurm_partition`` and
    ``slurm_account`` are taken from ``resources`` as the plugin would (account validation skipped).
    """
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    res = _Resources(resources)
    job = SimpleNamespace(resources=res, threads=threads)
    group = f"rule_{rule}"
    logfile = f"{slurm_logdir}/{group}/{wildcards}/%j.log" if wildcards else f"{slurm_logdir}/{group}/%j.log"
    params = {
        "run_uuid": run_uuid,
        "slurm_logfile": logfile,
        "comment_str": f"{group}_wildcards_{wildcards}" if wildcards else group,
        "account": f" -A {shlex.quote(str(res['slurm_account']))}" if res.get("slurm_account") else "",
        "partition": f" -p {shlex.quote(str(res['slurm_partition']))}" if res.get("slurm_partition") else "",
        "workdir": workdir,
    }
    settings = SimpleNamespace(requeue=requeue, no_requeue=False, qos=None, reservation=None)
    return get_submit_command(job, params, settings=settings) + set_gres_string(job)


def main() -> int:
    for name, shape_res in TRAINING_SHAPES.items():
        resources = {**PROFILE_TRAIN_RESOURCES, **shape_res}
        shape = TrainShape.from_resources(resources)
        print(f"# {name}: resources {resources}")
        print(sbatch_line(resources, wildcards=f"exp_{name}"))
        print(f"#   job runs: {shape.launcher()} train ...  (world size {shape.world_size})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
