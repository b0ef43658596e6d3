"""``--amp fairseq_fp16`` end to end on the CPU (fp16 arithmetic is the same IEEE format there):
the model trains in fp16 behind fp32 masters, overflows are skipped and lower the scale as fairseq's
scaler does, fairseq's "Minimum loss scale reached" and a scale stuck at its floor end the run as
diverged, checkpoints hold fp32 weights, and a preempted run resumes to the uninterrupted one."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.train.fp16_master import FP16MasterWeights
from pipeline_lib.train.loss_scaler import DynamicLossScaler

FP16 = ("--amp", "fairseq_fp16", "--optimizer", "adam", "--weight-decay", "0.01")


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bin_dir(tmp_path_factory.mktemp("fp16"))


def status(save_dir: Path) -> dict:
    return json.loads((save_dir / "status.json").read_text())


def test_fp16_training_learns_and_checkpoints_fp32_masters(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "run"
    assert main(train_args(bin_dir, save, *FP16, "--max-update", "60")) == 0
    losses = [r["loss"] for r in read_log(save)]
    assert len(losses) == 60 and sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5
    ckpt = load_checkpoint(save / "checkpoint_last.pt")
    assert all(v.dtype == torch.float32 for v in ckpt["model"].values() if v.is_floating_point())
    assert ckpt["scaler"]["loss_scale"] == 128.0  # no overflow, and no full window of 16384 updates
    # the masters are not the fp16 weights: a checkpoint of fp16-rounded values would equal its rounding
    weight = ckpt["model"]["encoder.embed.table.weight"]
    assert not torch.equal(weight, weight.half().float())


def test_overflows_are_skipped_and_halve_the_scale(bin_dir: Path, tmp_path: Path) -> None:
    # 2^24 times a summed loss of hundreds of nats overflows fp16 (max 65504) until the scale is low
    save = tmp_path / "run"
    assert main(train_args(bin_dir, save, *FP16, "--fp16-init-scale", str(2**24), "--max-update", "12")) == 0
    log = read_log(save)
    assert [r["update"] for r in log] == list(range(1, 13))  # skipped updates are not counted
    # each overflow halves the scale and nothing doubles it within fairseq's window of 16384
    overflows = [sum(r["overflows"] for r in log[: i + 1]) for i in range(len(log))]
    assert overflows[0] >= 8  # 2^24 down to at most 2^16 before the first step
    assert [r["loss_scale"] for r in log] == [2.0 ** (24 - n) for n in overflows]
    assert status(save)["status"] == "completed"


def test_minimum_loss_scale_ends_the_run_as_fairseq_does(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "run"
    flags = ("--fp16-init-scale", str(2**24), "--min-loss-scale", str(2**23), "--max-update", "12")
    assert main(train_args(bin_dir, save, *FP16, *flags)) == 0
    st = status(save)
    assert st["status"] == "diverged" and st["criterion"] == "loss_scale"
    assert st["reason"].startswith(f"Minimum loss scale reached ({float(2**23)})")


def test_a_scale_stuck_at_its_floor_ends_the_run(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "run"
    flags = ("--fp16-init-scale", str(2**24), "--threshold-loss-scale", str(2**23), "--max-update", "5")
    assert main(train_args(bin_dir, save, *FP16, *flags)) == 0
    st = status(save)
    assert st["status"] == "diverged" and st["criterion"] == "loss_scale"
    assert "at its floor 8.38861e+06" in st["reason"] and "100 updates in a row" in st["reason"]
    assert st["update"] == 1  # nothing ever stepped


def test_a_preempted_fp16_run_resumes_to_the_uninterrupted_one(bin_dir: Path, tmp_path: Path) -> None:
    flags = (*FP16, "--fp16-init-scale", str(2**20), "--fp16-scale-window", "4", "--max-update", "16")
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert main(train_args(bin_dir, whole, *flags)) == 0
    assert main(train_args(bin_dir, parts, *flags[:-1], "8")) == 0  # stop at 8, then go on to 16
    assert main(train_args(bin_dir, parts, *flags)) == 0
    a, b = load_checkpoint(whole / "checkpoint_last.pt"), load_checkpoint(parts / "checkpoint_last.pt")
    assert a["scaler"] == b["scaler"] and a["num_updates"] == b["num_updates"] == 16
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    scales = [r["loss_scale"] for r in read_log(whole)]
    assert len(set(scales)) > 1  # the window of 4 moved the scale: the scaler's state was carried


def test_master_weights_normalise_as_fairseq() -> None:
    # fp16 grads of (loss sum x scale) -> fp32 masters x world / (tokens x scale)
    model = torch.nn.Linear(2, 1, bias=False)
    model.weight.data = torch.tensor([[1.0, 2.0]])
    fp16 = FP16MasterWeights(model, DynamicLossScaler(init_scale=64.0), min_loss_scale=1e-4)
    assert model.weight.dtype == torch.float16 and fp16.masters[0].dtype == torch.float32
    # the masters start from the fp16 weights, as fairseq's: an init that fp16 cannot hold is rounded
    rounded = FP16MasterWeights(torch.nn.Linear(1, 1, bias=False), DynamicLossScaler(), 1e-4)
    assert torch.equal(rounded.masters[0].data, rounded.model_params[0].data.float())
    model.weight.grad = torch.tensor([[64.0 * 3, 64.0 * -5]], dtype=torch.float16)
    fp16.gradients_to_masters(2 / 10)
    assert fp16.masters[0].grad.flatten().tolist() == pytest.approx([0.6, -1.0])
    opt = torch.optim.SGD(fp16.masters, lr=0.5)
    assert fp16.conclude(opt, math.sqrt(0.6**2 + 1.0))
    assert model.weight.flatten().tolist() == pytest.approx([0.7, 2.5], abs=1e-3)
    assert model.weight.grad is None and fp16.masters[0].grad is None
    assert not fp16.conclude(opt, math.inf) and fp16.loss_scale == 32.0


def test_fp16_training_refuses_the_combinations_it_cannot_run(bin_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(train_args(bin_dir, tmp_path / "a", *FP16, "--max-update", "2", "--cpu-workers", "2")) != 0
    assert "drop --cpu-workers" in capsys.readouterr().err
