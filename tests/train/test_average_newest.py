"""`average --save-dir` takes the newest N checkpoints by training position, and the result is their
mean: checkpoints whose weights all differ, more of them than are averaged, with names that sort
differently as text and as numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline_lib.checkpoint import epoch_path, interval_path, load_checkpoint, save_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

CONFIG = ModelConfig(
    src_vocab_size=10, tgt_vocab_size=10, encoder_layers=1, decoder_layers=1, d_model=8, ffn_dim=16, heads=2
)


def write_checkpoint(path: Path, seed: int, epoch: int, update: int) -> dict[str, torch.Tensor]:
    """A checkpoint with weights drawn from ``seed`` (every checkpoint differs in every float tensor)."""
    torch.manual_seed(seed)
    model = build_model(CONFIG)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    state = {
        "model_config": CONFIG.to_dict(),
        "model": weights,
        "num_updates": update,
        "epoch": epoch,
        "optimizer": None,
        "status": "ok",
    }
    save_checkpoint(state, path)
    return weights


def assert_mean_of(path: Path, parts: list[dict[str, torch.Tensor]]) -> None:
    averaged = load_checkpoint(path)["model"]
    for name, value in averaged.items():
        if value.is_floating_point():
            want = torch.stack([p[name] for p in parts]).mean(dim=0)
            torch.testing.assert_close(value, want, rtol=0, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_update_checkpoints_average_the_newest_n(tmp_path: Path, n: int) -> None:
    # (epoch, update): as text checkpoint_1_10 < checkpoint_1_9, as training positions 9 < 10
    positions = [(1, 5), (1, 9), (1, 10), (2, 100)]
    weights = [
        write_checkpoint(interval_path(tmp_path, epoch, update), seed, epoch, update)
        for seed, (epoch, update) in enumerate(positions)
    ]
    out = tmp_path / "avg.pt"
    args = ["average", "--save-dir", str(tmp_path), "--num-update-checkpoints", str(n), "--output", str(out)]
    assert main(args) == 0
    assert_mean_of(out, weights[-n:])
    state = load_checkpoint(out)
    assert state["num_updates"] == 100  # the newest input's position
    assert [Path(p).name for p in state["averaged_from"]] == [
        interval_path(tmp_path, e, u).name for e, u in positions[-n:]
    ]


def test_epoch_checkpoints_average_the_newest_n(tmp_path: Path) -> None:
    epochs = [1, 2, 9, 10, 11]  # checkpoint10.pt sorts before checkpoint9.pt as text
    weights = [write_checkpoint(epoch_path(tmp_path, e), e, e, 10 * e) for e in epochs]
    out = tmp_path / "avg.pt"
    assert (
        main(["average", "--save-dir", str(tmp_path), "--num-epoch-checkpoints", "3", "--output", str(out)])
        == 0
    )
    assert_mean_of(out, weights[-3:])


def test_upper_bound_averages_the_last_n_epochs_up_to_it(tmp_path: Path) -> None:
    # fairseq's average_checkpoints.py: --num-epoch-checkpoints 3 --checkpoint-upper-bound 10 takes
    # epochs 8-10 even though epochs 11 and 12 exist (deepnmt's eval: 10 epochs up to epoch 50)
    weights = {e: write_checkpoint(epoch_path(tmp_path, e), e, e, 100 * e) for e in range(1, 13)}
    out = tmp_path / "avg.pt"
    args = ["average", "--save-dir", str(tmp_path), "--num-epoch-checkpoints", "3", "--output", str(out)]
    assert main([*args, "--checkpoint-upper-bound", "10"]) == 0
    assert_mean_of(out, [weights[8], weights[9], weights[10]])
    assert load_checkpoint(out)["num_updates"] == 1000
    assert main([*args, "--checkpoint-upper-bound", "2"]) == 2  # two epochs up to 2: too few


def test_upper_bound_needs_epoch_averaging(tmp_path: Path, capsys) -> None:
    out = tmp_path / "avg.pt"
    args = ["average", "--save-dir", str(tmp_path), "--num-update-checkpoints", "2", "--output", str(out)]
    assert main([*args, "--checkpoint-upper-bound", "5"]) == 2
    assert "--checkpoint-upper-bound requires --num-epoch-checkpoints" in capsys.readouterr().err
