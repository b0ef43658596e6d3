"""Where this process sits in a distributed run: rank, world size, rendezvous address, backend.

Two launchers are understood, so the same training command works on a workstation and on SLURM:

* torchrun (single node, ``--nproc-per-node N``): RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR /
  MASTER_PORT are set by torchrun and win over everything else.
* srun (one process per GPU across nodes, the workflow's ``mpi="srun"`` jobs): SLURM_PROCID /
  SLURM_STEP_NUM_TASKS (or SLURM_NTASKS) / SLURM_LOCALID; the master is the first host of the step's
  node list (expanded by ``scontrol show hostnames``) and the port is derived from the job id, so
  every rank computes the same address without talking to the others.

Anything else is a single process (rank 0 of 1).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pipeline_lib.errors import ConfigError

DEFAULT_MASTER_PORT = 29500
# Ports derived from SLURM_JOB_ID fall in [_PORT_BASE, _PORT_BASE + _PORT_SPAN): above the usual
# service ports, below the Linux ephemeral range (32768+ is avoided only partly; collisions need two
# jobs whose ids differ by a multiple of _PORT_SPAN on the same master node).
_PORT_BASE = 10000
_PORT_SPAN = 20000

_BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


def scontrol_hostnames(nodelist: str) -> list[str]:
    """Expand a SLURM host list such as ``gpu[01-03,07]`` with ``scontrol show hostnames``."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
        ).stdout
    except FileNotFoundError as e:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r}: `scontrol` not found to expand it") from e
    except subprocess.CalledProcessError as e:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r}: scontrol failed: {e.stderr.strip()}") from e
    hosts = out.split()
    if not hosts:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r}: scontrol returned no host names")
    return hosts


def _int_var(environ: Mapping[str, str], name: str) -> int:
    value = environ[name]
    try:
        return int(value)
    except ValueError as e:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer") from e


@dataclass(frozen=True)
class DistributedEnv:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    backend: str
    launcher: str = "single"  # "torchrun", "srun" or "single": for logs

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ConfigError(f"world size must be >= 1, got {self.world_size} ({self.launcher})")
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank {self.rank} outside [0, {self.world_size}) ({self.launcher})")
        if self.local_rank < 0:
            raise ConfigError(f"local rank must be >= 0, got {self.local_rank} ({self.launcher})")
        if not 0 < self.master_port < 65536:
            raise ConfigError(f"master port {self.master_port} outside 1..65535 ({self.launcher})")

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes checkpoints and logs."""
        return self.rank == 0

    @property
    def init_method(self) -> str:
        """``init_method`` for ``torch.distributed.init_process_group``."""
        host = f"[{self.master_addr}]" if ":" in self.master_addr else self.master_addr
        return f"tcp://{host}:{self.master_port}"

    @classmethod
    def from_environ(
        cls,
        environ: Mapping[str, str],
        device_type: str,
        hostnames: Callable[[str], list[str]] = scontrol_hostnames,
    ) -> DistributedEnv:
        """Read the launcher's variables. ``device_type`` is "cpu" (gloo) or "cuda" (nccl)."""
        if device_type not in _BACKENDS:
            raise ConfigError(f"device type {device_type!r}: expected one of {sorted(_BACKENDS)}")
        backend = _BACKENDS[device_type]

        if "RANK" in environ and "WORLD_SIZE" in environ:
            for name in ("MASTER_ADDR", "MASTER_PORT"):
                if name not in environ:
                    raise ConfigError(f"RANK/WORLD_SIZE are set but {name} is not (launcher: torchrun?)")
            return cls(
                rank=_int_var(environ, "RANK"),
                world_size=_int_var(environ, "WORLD_SIZE"),
                local_rank=_int_var(environ, "LOCAL_RANK") if "LOCAL_RANK" in environ else 0,
                master_addr=environ["MASTER_ADDR"],
                master_port=_int_var(environ, "MASTER_PORT"),
                backend=backend,
                launcher="torchrun",
            )

        # Inside an srun step. The batch script itself also has SLURM_PROCID=0 and SLURM_NTASKS = the
        # job's task count but runs only once, so the step's own task count is preferred.
        if "SLURM_PROCID" in environ and ("SLURM_STEP_NUM_TASKS" in environ or "SLURM_NTASKS" in environ):
            world_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in environ else "SLURM_NTASKS"
            world_size = _int_var(environ, world_var)
            rank = _int_var(environ, "SLURM_PROCID")
            local_rank = _int_var(environ, "SLURM_LOCALID") if "SLURM_LOCALID" in environ else 0
            if "MASTER_ADDR" in environ:
                master_addr = environ["MASTER_ADDR"]
            else:
                nodelist_var = next(
                    (
                        v
                        for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
                        if v in environ
                    ),
                    None,
                )
                if nodelist_var is None:
                    if world_size > 1:
                        raise ConfigError("SLURM_PROCID is set but SLURM_JOB_NODELIST is not: no master host")
                    master_addr = "127.0.0.1"
                else:
                    master_addr = hostnames(environ[nodelist_var])[0]
            if "MASTER_PORT" in environ:
                master_port = _int_var(environ, "MASTER_PORT")
            elif "SLURM_JOB_ID" in environ:
                master_port = _PORT_BASE + _int_var(environ, "SLURM_JOB_ID") % _PORT_SPAN
            else:
                master_port = DEFAULT_MASTER_PORT
            return cls(
                rank=rank,
                world_size=world_size,
                local_rank=local_rank,
                master_addr=master_addr,
                master_port=master_port,
                backend=backend,
                launcher="srun",
            )

        return cls(
            rank=0,
            world_size=1,
            local_rank=0,
            master_addr=environ.get("MASTER_ADDR", "127.0.0.1"),
            master_port=_int_var(environ, "MASTER_PORT") if "MASTER_PORT" in environ else DEFAULT_MASTER_PORT,
            backend=backend,
            launcher="single",
        )
