"""``--deferred-stats``: each update is judged after the next one's forward and backward are queued.

The runs it gives are the runs without it (same logs, checkpoints and outcome, divergence included),
and the trainer's only host reads in a step are the previous update's statistics, read after the next
forward: on a GPU, the host never waits for the device inside a step. Host reads are seen here through
a TorchFunctionMode, which sees every ``tolist``/``item``/``float``/``bool`` on a tensor.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main

UNCOMPARED = (
    "tokens_per_s",
    "updates_per_s",
    "time",
    "memory_mb",
    "train",
    "checkpoint",
)  # timings, paths, flags


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bin_dir(tmp_path_factory.mktemp("deferred"))


def records(save_dir: Path) -> list[dict]:
    lines = (save_dir / "train_log.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in UNCOMPARED} for line in lines]


def run_both(bin_dir: Path, tmp_path: Path, *flags: str) -> tuple[Path, Path]:
    plain, deferred = tmp_path / "plain", tmp_path / "deferred"
    assert main(train_args(bin_dir, plain, *flags)) == 0
    assert main(train_args(bin_dir, deferred, *flags, "--deferred-stats")) == 0
    return plain, deferred


def assert_same_checkpoint(a: Path, b: Path) -> None:
    ca, cb = load_checkpoint(a), load_checkpoint(b)
    assert ca["num_updates"] == cb["num_updates"] and ca["iterator"] == cb["iterator"]
    assert all(torch.equal(ca["model"][k], cb["model"][k]) for k in ca["model"])
    for sa, sb in zip(ca["optimizer"]["state"].values(), cb["optimizer"]["state"].values(), strict=True):
        assert all(torch.equal(sa[k], sb[k]) if torch.is_tensor(sa[k]) else sa[k] == sb[k] for k in sa)
    assert ca["scheduler"] == cb["scheduler"] and ca["trainer"] == cb["trainer"]


@pytest.mark.parametrize(
    "flags",
    [
        # two epochs, interval checkpoints inside them, dropout, accumulation over micro-batches
        ("--max-epoch", "3", "--save-interval-updates", "2", "--keep-interval-updates", "2",
         "--update-freq", "2", "--dropout", "0.2", "--max-tokens", "100"),
        # --max-update stopping inside an epoch
        ("--max-update", "7", "--dropout", "0.1", "--optimizer", "radam"),
    ],
)  # fmt: skip
def test_deferred_stats_give_the_same_run(bin_dir: Path, tmp_path: Path, flags: tuple[str, ...]) -> None:
    plain, deferred = run_both(bin_dir, tmp_path, *flags)
    assert records(deferred) == records(plain)
    assert len(read_log(plain)) >= 7
    names = sorted(p.name for p in plain.glob("checkpoint*.pt"))
    assert names == sorted(p.name for p in deferred.glob("checkpoint*.pt")) and len(names) >= 2
    for name in names:
        assert_same_checkpoint(plain / name, deferred / name)
    assert json.loads((deferred / "status.json").read_text()) == json.loads(
        (plain / "status.json").read_text()
    ) | {"checkpoint": str(deferred / "checkpoint_last.pt")}


def test_a_divergence_is_caught_at_the_same_update_with_nothing_saved_after_it(
    bin_dir: Path, tmp_path: Path
) -> None:
    flags = ("--max-epoch", "20", "--divergence-window", "3", "--save-interval-updates", "2", "--lr", "50",
             "--warmup-updates", "1")  # fmt: skip
    plain, deferred = run_both(bin_dir, tmp_path, *flags)
    status = json.loads((plain / "status.json").read_text())
    assert status["status"] == "diverged"
    assert json.loads((deferred / "status.json").read_text()) == status | {
        "checkpoint": str(deferred / "checkpoint_last.pt")
    }
    assert records(deferred) == records(plain)
    assert_same_checkpoint(plain / "checkpoint_last.pt", deferred / "checkpoint_last.pt")


READS = {"tolist", "item", "__float__", "__bool__", "__int__", "__index__"}


class HostReads(TorchFunctionMode):
    """Every host read of a tensor made by pipeline_lib code, and every forward pass ('F')."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        caller = sys._getframe(1).f_code
        if "pipeline_lib" in caller.co_filename:
            name = getattr(func, "__name__", "")
            if name in READS:
                self.events.append((Path(caller.co_filename).name, caller.co_name))
            elif caller.co_name == "encode" and name == "eq":  # the padding mask: once per forward
                self.events.append(("F", "forward"))
        return func(*args, **(kwargs or {}))


def step_sequence(bin_dir: Path, save_dir: Path, *flags: str) -> tuple[str, list[tuple[str, str]]]:
    with HostReads() as reads:
        # no mid-run validation (its reads would interleave): the first validation ends the 4 updates
        assert (
            main(
                train_args(bin_dir, save_dir, "--max-update", "4", "--validate-interval-updates", "0", *flags)
            )
            == 0
        )
    training = reads.events[: reads.events.index(("validation.py", "validate"))]
    # the validation's forwards come last, before its own read
    sequence = "".join("F" if e[0] == "F" else "R" for e in training).rstrip("F")
    return sequence, [e for e in training if e[0] != "F"]


def test_the_step_reads_the_host_once_per_update_and_after_the_next_forward(
    bin_dir: Path, tmp_path: Path
) -> None:
    # without the flag each update is read right after its own forward and backward
    sequence, reads = step_sequence(bin_dir, tmp_path / "plain")
    assert sequence == "FR" * 4
    assert set(reads) == {("update.py", "train_step")}
    # with it: update k is read after update k+1's forward (the last one at the end of the run), and
    # nothing else in the step, the model or the loss reads the device
    sequence, reads = step_sequence(bin_dir, tmp_path / "deferred", "--deferred-stats")
    assert sequence == "F" + "FR" * 3 + "R"
    assert set(reads) == {("pending_update.py", "read")}


def test_deferred_stats_refuse_fp16(bin_dir: Path, tmp_path: Path, capsys) -> None:
    args = train_args(bin_dir, tmp_path / "x", "--max-update", "1", "--deferred-stats", "--amp", "fp16")
    assert main(args) == 2
    assert "--amp bf16 or none" in capsys.readouterr().err
