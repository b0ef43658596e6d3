"""What a training shows while it runs: progress lines for a log file, TensorBoard event files (read
back with TensorBoard's own reader) and validation every N updates. Real tiny trainings via the CLI."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator
from tensorboard.util import tensor_util
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.report.inputs import read_train_log
from pipeline_lib.train.progress import Planned, ProgressLines, clock_text, planned_updates, resolve_mode
from pipeline_lib.train.tensorboard_log import TB_DIR


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    return make_bin_dir(tmp_path_factory.mktemp("data"))


def scalars(save_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series as TensorBoard shows it (its reader, restart purges included); checked
    equal to what ``tensorboard --load_fast=false`` serves, whose reader purges by other rules."""
    acc = EventAccumulator(str(save_dir / TB_DIR), size_guidance={SCALARS: 0})
    acc.Reload()
    out = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    served = plugin_event_accumulator.EventAccumulator(str(save_dir / TB_DIR), size_guidance={"tensors": 0})
    served.Reload()
    assert {
        tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in served.Tensors(tag)]
        for tag in served.Tags()["tensors"]
    } == out
    return out


def series(records: list[dict], key: str) -> list[tuple[int, float]]:
    return [(r["update"], r[key]) for r in records]


def assert_same_points(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [s for s, _ in got] == [s for s, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6)  # float32 in the file


def test_tensorboard_holds_the_logged_scalars_and_progress_lines_show(
    bin_dir: Path, tmp_path: Path, capsys
) -> None:
    save = tmp_path / "run"
    args = train_args(
        bin_dir, save, "--max-update", "7", "--progress-interval", "0", "--validate-interval-updates", "0"
    )
    args[args.index("--progress") + 1] = "lines"
    assert main(args) == 0
    train, valid = read_log(save), read_log(save, "valid")
    assert len(train) == 7 and len(valid) == 2  # the epoch end at update 4 and the run's end
    tb = scalars(save)
    assert {"train/loss", "train/nll_loss", "train/lr", "train/gnorm", "train/tokens_per_s"} <= set(tb)
    assert {"valid/loss", "valid/ppl"} <= set(tb)
    assert "train/loss_scale" not in tb  # fp16 only
    for key in ("loss", "nll_loss", "lr", "gnorm", "tokens_per_s"):
        assert_same_points(tb[f"train/{key}"], series(train, key))
    for key in ("loss", "ppl"):
        assert_same_points(tb[f"valid/{key}"], series(valid, key))
    assert all(v > 0 for _, v in tb["train/tokens_per_s"])
    # --progress-interval 0: a line per update, each with that update's loss as the log has it
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("progress: ")]
    assert [int(re.search(r"update (\d+)/7 ", line)[1]) for line in lines] == list(range(1, 8))
    logged = [float(re.search(r"\| loss (\S+) \|", line)[1]) for line in lines]
    assert logged == [round(r["loss"], 3) for r in train]
    assert all(re.search(r"tok/s \| elapsed \d+:\d\d:\d\d \| eta \d+:\d\d:\d\d$", line) for line in lines)


def test_a_resumed_run_shows_each_update_once(bin_dir: Path, tmp_path: Path) -> None:
    """A run that got past its last checkpoint before it stopped: the resumed run redoes those
    updates, and TensorBoard must show them once, as the (truncated) JSONL log does."""
    save = tmp_path / "run"
    command = train_args(
        bin_dir, save, "--max-update", "7", "--save-interval-updates", "5", "--keep-interval-updates", "2"
    )
    assert main(command) == 0  # events up to 7; checkpoints at 4 (epoch 1), 5 and 7
    for path in save.glob("checkpoint*.pt"):
        if load_checkpoint(path)["num_updates"] > 5:
            path.unlink()
    assert main(command) == 0  # the same command: resumes at 5 and redoes 6 and 7
    assert [r["update"] for r in read_log(save, "resume")] == [5]
    train = read_log(save)
    assert [r["update"] for r in train] == list(range(1, 8))
    tb = scalars(save)
    assert_same_points(tb["train/loss"], series(train, "loss"))
    assert_same_points(tb["valid/ppl"], series(read_log(save, "valid"), "ppl"))

    # A fresh start (no checkpoint left) drops the earlier attempts' event files, as it resets the log.
    for path in save.glob("checkpoint*.pt"):
        path.unlink()
    assert main(command) == 0
    assert not read_log(save, "resume")
    assert len(list((save / TB_DIR).glob("events.out.tfevents.*"))) == 1
    assert_same_points(scalars(save)["train/loss"], series(read_log(save), "loss"))


def test_validate_interval_updates_adds_dev_points_without_changing_training(
    bin_dir: Path, tmp_path: Path
) -> None:
    plain, dense = tmp_path / "plain", tmp_path / "dense"
    assert main(train_args(bin_dir, plain, "--max-epoch", "3", "--validate-interval-updates", "0")) == 0
    assert main(train_args(bin_dir, dense, "--max-epoch", "3", "--validate-interval-updates", "3")) == 0
    train = read_log(dense)
    assert series(train, "loss") == series(read_log(plain), "loss")  # validation perturbs nothing
    last = train[-1]["update"]
    epoch_ends = sorted({max(r["update"] for r in train if r["epoch"] == e) for e in (1, 2, 3)})
    valid = read_log(dense, "valid")
    every_third = [u for u in range(3, last, 3) if u not in epoch_ends]
    assert every_third  # the test needs mid-epoch points
    assert [v["update"] for v in valid] == sorted(every_third + epoch_ends)
    assert [v["update"] for v in valid if v.get("mid_epoch")] == every_third
    assert_same_points(scalars(dense)["valid/ppl"], series(valid, "ppl"))
    # The epoch-end records stay what the report reads per epoch, and status.json's dev perplexity
    # (Table 1's "dev ppl") is the run's last validation, at its last update.
    plain_valid = read_log(plain, "valid")
    report = read_train_log(dense / "train_log.jsonl")
    assert report.valid_ppl == {v["epoch"]: v["ppl"] for v in plain_valid}
    assert report.valid_points == series(valid, "ppl")
    status = json.loads((dense / "status.json").read_text())
    assert status["valid"]["ppl"] == valid[-1]["ppl"] == plain_valid[-1]["ppl"]
    assert valid[-1]["update"] == last
    # --deferred-stats judges an update after the next one's backward: it validates the same weights
    deferred = tmp_path / "deferred"
    args = ("--max-epoch", "3", "--validate-interval-updates", "3", "--deferred-stats")
    assert main(train_args(bin_dir, deferred, *args)) == 0
    assert read_log(deferred, "valid") == valid


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_at_the_first_update_then_at_most_every_interval() -> None:
    clock = FakeClock()
    out = io.StringIO()
    lines = ProgressLines(30.0, first_update=10, stream=out, clock=clock)
    lines.planned = Planned(110, estimate=False)
    ln2_bits = 0.6931471805599453  # a loss sum of ln 2 nats per token is 1 bit per token
    emitted = []
    for update in range(11, 31):
        clock.now += 3.0
        emitted.append(lines.step(update, 2, 1e-3, ln2_bits * 500, ln2_bits * 400, 500, 2.0))
    shown = [line for line in emitted if line is not None]
    # the session's first update, then 30 s later (10 updates of 3 s each), then 30 s after that
    assert [int(re.search(r"update (\d+)/", line)[1]) for line in shown] == [11, 21]
    assert "update 21/110 (19.1%)" in shown[1] and "loss 1.000 | nll 0.800 bits" in shown[1]
    assert "5000 tok/s" not in shown[1] and "167 tok/s" in shown[1]  # 10 x 500 tokens in 30 s
    # 11 updates in 33 s since the session began: 3 s each, 89 to go
    assert shown[1].endswith(f"elapsed 0:00:33 | eta {clock_text(89 * 3.0)}")
    assert out.getvalue() == "".join(line + "\n" for line in shown)
    assert clock_text(3725.4) == "1:02:05"


def test_planned_updates_and_modes() -> None:
    # 10 batches, 2 per update: 5 updates an epoch; at update 7, 4 batches into epoch 2 of 3
    assert planned_updates(7, 4, 10, 2, 2, 3, 0) == Planned(7 + 3 + 5, estimate=True)
    assert planned_updates(7, 4, 10, 2, 3, 3, 0) == Planned(10, estimate=False)  # the last epoch
    assert planned_updates(7, 4, 10, 2, 2, 3, 12) == Planned(12, estimate=False)
    assert planned_updates(7, 4, 10, 2, 2, 0, 40) == Planned(40, estimate=False)
    assert resolve_mode("auto", isatty=False) == "lines" and resolve_mode("auto", isatty=True) == "tqdm"
    assert resolve_mode("none", isatty=True) == "none"
