from __future__ import annotations

import pytest

from pipeline_lib.errors import ConfigError
from pipeline_lib.train.distributed_env import DistributedEnv


def _no_scontrol(nodelist):
    raise AssertionError(f"scontrol must not be called ({nodelist})")


def test_single_process_without_launcher():
    env = DistributedEnv.from_environ({}, "cpu", hostnames=_no_scontrol)
    assert (env.rank, env.world_size, env.local_rank, env.backend, env.launcher) == (
        0,
        1,
        0,
        "gloo",
        "single",
    )
    assert not env.is_distributed and env.is_main


def test_torchrun_variables_win_over_slurm():
    environ = {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "5",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29400",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_JOB_NODELIST": "gpu01",
    }
    env = DistributedEnv.from_environ(environ, "cuda", hostnames=_no_scontrol)
    assert env == DistributedEnv(5, 8, 5, "10.0.0.1", 29400, "nccl", "torchrun")
    assert env.init_method == "tcp://10.0.0.1:29400"


def test_srun_rank_world_and_master_from_nodelist():
    calls = []

    def hostnames(nodelist):
        calls.append(nodelist)
        return ["gpu07", "gpu08"]

    environ = {
        "SLURM_PROCID": "11",
        "SLURM_NTASKS": "16",
        "SLURM_STEP_NUM_TASKS": "16",
        "SLURM_LOCALID": "3",
        "SLURM_JOB_ID": "123456",
        "SLURM_JOB_NODELIST": "gpu[07-08]",
        "SLURM_STEP_NODELIST": "gpu[07-08]",
    }
    env = DistributedEnv.from_environ(environ, "cuda", hostnames=hostnames)
    assert (env.rank, env.world_size, env.local_rank, env.launcher) == (11, 16, 3, "srun")
    assert env.master_addr == "gpu07" and calls == ["gpu[07-08]"]
    assert env.master_port == 10000 + 123456 % 20000
    # every rank of the job derives the same port
    other = DistributedEnv.from_environ(
        {**environ, "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}, "cuda", hostnames
    )
    assert (other.master_addr, other.master_port) == (env.master_addr, env.master_port)


def test_srun_step_task_count_preferred_over_job_task_count():
    # The plugin's `srun -n1` step inside a 16-task job: one process, not 16.
    environ = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "16",
        "SLURM_STEP_NUM_TASKS": "1",
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "n1",
    }
    env = DistributedEnv.from_environ(environ, "cpu", hostnames=lambda _: ["n1"])
    assert env.world_size == 1 and env.backend == "gloo"


def test_explicit_master_overrides_derivation():
    environ = {
        "SLURM_PROCID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_JOB_ID": "9",
        "SLURM_JOB_NODELIST": "a[1-2]",
        "MASTER_ADDR": "head",
        "MASTER_PORT": "40000",
    }
    env = DistributedEnv.from_environ(environ, "cpu", hostnames=_no_scontrol)
    assert (env.master_addr, env.master_port) == ("head", 40000)


def test_ipv6_master_is_bracketed():
    env = DistributedEnv(0, 2, 0, "fe80::1", 1234, "gloo")
    assert env.init_method == "tcp://[fe80::1]:1234"


@pytest.mark.parametrize(
    ("environ", "device", "match"),
    [
        ({}, "tpu", "device type"),
        ({"RANK": "0", "WORLD_SIZE": "2"}, "cpu", "MASTER_ADDR"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "cpu", "rank 2 outside"),
        ({"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "cpu", "RANK='x'"),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, "cpu", "SLURM_JOB_NODELIST"),
    ],
)
def test_bad_environments_name_the_variable(environ, device, match):
    with pytest.raises(ConfigError, match=match):
        DistributedEnv.from_environ(environ, device, hostnames=_no_scontrol)
