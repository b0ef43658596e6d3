"""``--deferred-stats``: each update is judged after the next one's forward and backward are queued.

The runs it gives are the runs without it (same logs, checkpoints and outcome, divergence included),
and the trainer's only host reads in a step are the previous update's statistics, read after the next
forward: on a GPU, the host never waits for the device inside a step. Host reads are seen here through
a TorchFunctionMode, which sees every ``tolist``/``item``/``float``/``bool`` on a tensor.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import FrameType

import pytest
import torch
from torch.overrides import TorchFunctionMode
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.train import trainer as trainer_module
from pipeline_lib.train.config import TrainConfig

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
    """Every host read of a tensor made by pipeline_lib code or torch's GradScaler, and every forward
    pass ('F'; 'P' when it reruns the forward queued after an overflow)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        caller = sys._getframe(1).f_code
        if "pipeline_lib" in caller.co_filename or caller.co_filename.endswith("grad_scaler.py"):
            name = getattr(func, "__name__", "")
            if name in READS:
                self.events.append((Path(caller.co_filename).name, caller.co_name))
            elif caller.co_name == "encode" and name == "eq":  # the padding mask: once per forward
                self.events.append(("P" if in_replay(sys._getframe(1)) else "F", "forward"))
        return func(*args, **(kwargs or {}))


def in_replay(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "replay":
            return True
        frame = frame.f_back
    return False


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
    sequence = "".join(e[0] if e[0] in "FP" else "R" for e in training).rstrip("F")
    return sequence, [e for e in training if e[0] not in "FP"]


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


# ----------------------------------------------------------------------------- fp16
# Each update is queued as if the one being judged did not overflow; an overflow is taken back when read
# and the queued forward/backward reruns with the skip's seed and scale. Planted overflows: an initial
# scale of 2^24 (fairseq and GradScaler) overflows the first updates, and a scale window of 4 (3)
# doubles the scale into more overflows mid-run; with --max-update 10 the last attempt of the
# fairseq run overflows too, while the loop has stopped queueing.
FAIRSEQ_FP16 = ("--amp", "fairseq_fp16", "--weight-decay", "0.01", "--dropout", "0.1",
                "--fp16-init-scale", str(2**24), "--fp16-scale-window", "4", "--save-interval-updates", "3")  # fmt: skip


@pytest.fixture
def overflowing_grad_scaler(monkeypatch: pytest.MonkeyPatch) -> None:
    """--amp fp16's GradScaler from 2^24, doubling every 3 clean steps: overflows at the start and
    mid-run (the trainer's own has no flags for them)."""

    def build_scaler(cfg: TrainConfig, device: torch.device) -> torch.amp.GradScaler:
        fp16 = cfg.amp == "fp16"
        return torch.amp.GradScaler(device.type, init_scale=2.0**24, growth_interval=3, enabled=fp16)

    monkeypatch.setattr(trainer_module, "build_scaler", build_scaler)


@pytest.fixture
def fp16_on_cpu(monkeypatch: pytest.MonkeyPatch, overflowing_grad_scaler: None) -> None:
    """--amp fp16 is refused on a CPU as pointless, not as impossible: torch's GradScaler and fp16
    autocast run there, which lets the deferred path be checked against the synchronous one here."""
    post_init = TrainConfig.__post_init__

    def allow_fp16_on_cpu(cfg: TrainConfig) -> None:
        device = cfg.device
        object.__setattr__(cfg, "device", "cuda" if cfg.amp == "fp16" else device)
        post_init(cfg)
        object.__setattr__(cfg, "device", device)

    monkeypatch.setattr(TrainConfig, "__post_init__", allow_fp16_on_cpu)


def assert_same_fp16_run(plain: Path, deferred: Path, last_attempt_overflows: bool = False) -> None:
    assert records(deferred) == records(plain)
    log = read_log(plain)
    overflows = [r["overflows"] for r in log]
    assert overflows[0] >= 3 and sum(overflows[1:]) >= 1, overflows  # at the start and mid-run
    if last_attempt_overflows:  # read after the loop stopped queueing: the run goes on after it
        assert overflows[-1] > 0, overflows
    names = sorted(p.name for p in plain.glob("checkpoint*.pt"))
    assert names == sorted(p.name for p in deferred.glob("checkpoint*.pt")) and len(names) >= 3
    for name in names:
        assert_same_checkpoint(plain / name, deferred / name)
        assert load_checkpoint(plain / name)["scaler"] == load_checkpoint(deferred / name)["scaler"]


@pytest.mark.parametrize(
    "flags, last_attempt_overflows",
    [
        (("--optimizer", "adam", "--max-update", "10"), True),
        (("--optimizer", "radam", "--update-freq", "2", "--max-tokens", "100", "--clip-norm", "0.5",
          "--max-update", "12"), False),
        (("--optimizer", "adam", "--update-freq", "2", "--max-tokens", "100", "--max-update", "12"), False),
        (("--optimizer", "radam", "--max-epoch", "6"), False),  # ends at an epoch end
    ],
)  # fmt: skip
def test_deferred_fairseq_fp16_gives_the_same_run(
    bin_dir: Path, tmp_path: Path, flags: tuple[str, ...], last_attempt_overflows: bool
) -> None:
    plain, deferred = run_both(bin_dir, tmp_path, *FAIRSEQ_FP16, *flags)
    assert_same_fp16_run(plain, deferred, last_attempt_overflows)


@pytest.mark.parametrize(
    "flags, reason",
    [
        # fairseq's stop: an overflow leaves the scale at the minimum
        (("--min-loss-scale", str(2**20)), "Minimum loss scale reached"),
        # a scale stuck at its floor: 100 overflows in a row end the run (20 s: 2 x 100 attempts)
        pytest.param(
            ("--threshold-loss-scale", str(2**23), "--fp16-scale-window", "16384"),
            "at its floor",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_deferred_fairseq_fp16_ends_at_the_minimum_scale_as_the_plain_run(
    bin_dir: Path, tmp_path: Path, flags: tuple[str, ...], reason: str
) -> None:
    plain, deferred = run_both(bin_dir, tmp_path, *FAIRSEQ_FP16, "--max-update", "12", *flags)
    status = json.loads((plain / "status.json").read_text())
    assert (
        status["status"] == "diverged" and status["criterion"] == "loss_scale" and reason in status["reason"]
    )
    assert json.loads((deferred / "status.json").read_text()) == status | {
        "checkpoint": str(deferred / "checkpoint_last.pt")
    }
    assert records(deferred) == records(plain)


@pytest.mark.parametrize(
    "flags",
    [
        ("--optimizer", "adam", "--max-update", "10", "--save-interval-updates", "3"),
        ("--optimizer", "radam", "--update-freq", "2", "--max-tokens", "100", "--max-update", "12",
         "--save-interval-updates", "3", "--dropout", "0.1"),
    ],
)  # fmt: skip
def test_deferred_amp_fp16_gives_the_same_run(
    bin_dir: Path, tmp_path: Path, fp16_on_cpu: None, flags: tuple[str, ...]
) -> None:
    plain, deferred = run_both(bin_dir, tmp_path, "--amp", "fp16", *flags)
    assert_same_fp16_run(plain, deferred)


def test_deferred_amp_fp16_ends_when_the_scale_collapses_as_the_plain_run(
    bin_dir: Path, tmp_path: Path, fp16_on_cpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two overflows take a GradScaler from 2^60 with a backoff of 2^-40 below the 1e-4 minimum
    def collapsing(cfg: TrainConfig, device: torch.device) -> torch.amp.GradScaler:
        return torch.amp.GradScaler(device.type, init_scale=2.0**60, backoff_factor=2.0**-40)

    monkeypatch.setattr(trainer_module, "build_scaler", collapsing)
    plain, deferred = run_both(bin_dir, tmp_path, "--amp", "fp16", "--max-update", "5")
    status = json.loads((plain / "status.json").read_text())
    assert status["status"] == "diverged" and status["criterion"] == "loss_scale"
    assert json.loads((deferred / "status.json").read_text()) == status | {
        "checkpoint": str(deferred / "checkpoint_last.pt")
    }
    assert records(deferred) == records(plain)


@pytest.mark.parametrize("amp", ["fairseq_fp16", "fp16"])
def test_fp16_deferred_reads_the_host_once_per_attempt(
    bin_dir: Path, tmp_path: Path, fp16_on_cpu: None, amp: str
) -> None:
    """Synchronous, each attempt's overflow is read at once (fp16: in GradScaler.step and get_scale);
    deferred, the only reads are the statistics', one per attempt, after the next forward, and each
    overflow costs one more forward: the rerun ('P')."""
    # small batches: the 4 updates and the overflows before them fit in the first epoch
    flags = ("--amp", amp, "--max-tokens", "40")
    if amp == "fairseq_fp16":
        flags += ("--fp16-init-scale", str(2**20))
    sequence, reads = step_sequence(bin_dir, tmp_path / "plain", *flags)
    assert re.fullmatch("(FR+)+", sequence), sequence
    attempts = sequence.count("F")
    assert attempts >= 4 + 2, sequence  # 4 updates, at least 2 overflows
    sequence, reads = step_sequence(bin_dir, tmp_path / "deferred", *flags, "--deferred-stats")
    assert set(reads) == {("pending_update.py", "read")} and len(reads) == attempts
    assert sequence.count("P") == attempts - 4
    assert sequence.replace("P", "") == "F" + "FR" * (attempts - 1) + "R", sequence
