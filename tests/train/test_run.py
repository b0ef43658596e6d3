"""Real tiny training runs through the CLI: loss falls, exact resume, divergence, Admin, averaging."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint, load_model
from pipeline_lib.cli import main
from pipeline_lib.cpu import weight_grad_sharing
from pipeline_lib.cpu.onednn import onednn_available
from pipeline_lib.cpu.weight_grad_sharing import SharedWeightGrads
from pipeline_lib.data.indexed import ParallelCorpus
from pipeline_lib.decode.search import EOS
from pipeline_lib.divergence.rule import unigram_entropy_bits


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    return make_bin_dir(tmp_path_factory.mktemp("data"))


def losses(save_dir: Path) -> dict[int, float]:
    return {r["update"]: r["loss"] for r in read_log(save_dir)}


def test_loss_falls_and_outputs(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "run"
    assert main(train_args(bin_dir, save, "--max-epoch", "8", "--keep-last-epochs", "3")) == 0
    train = read_log(save)
    valid = read_log(save, "valid")
    assert len(valid) == 8
    assert valid[-1]["loss"] < valid[0]["loss"] - 0.5, [v["loss"] for v in valid]
    assert sum(r["loss"] for r in train[-4:]) / 4 < sum(r["loss"] for r in train[:4]) / 4 - 0.5
    for key in ("loss", "nll_loss", "ppl", "lr", "gnorm", "tokens_per_s", "updates_per_s", "memory_mb"):
        assert key in train[-1]
    assert train[-1]["memory_kind"] == "peak_rss" and train[-1]["memory_mb"] > 0
    names = sorted(p.name for p in save.glob("checkpoint*.pt"))
    assert names == [
        "checkpoint6.pt",
        "checkpoint7.pt",
        "checkpoint8.pt",
        "checkpoint_best.pt",
        "checkpoint_last.pt",
    ]
    status = json.loads((save / "status.json").read_text())
    assert (
        status["status"] == "completed" and status["update"] == train[-1]["update"] and status["epoch"] == 8
    )
    ckpt = load_checkpoint(save / "checkpoint8.pt")
    assert ckpt["iterator"]["epoch"] == 9 and ckpt["iterator"]["batch_index"] == 0 and ckpt["epoch"] == 8
    assert ckpt["vocab_sha256"] and "rng" not in ckpt
    model, meta = load_model(save / "checkpoint_last.pt")
    assert not model.training and "optimizer" not in meta
    # Re-running a finished command resumes, finds nothing to do, and keeps the result.
    assert main(train_args(bin_dir, save, "--max-epoch", "8", "--keep-last-epochs", "3")) == 0
    assert losses(save) == {r["update"]: r["loss"] for r in train}


def test_resume_after_max_update_is_bit_identical(bin_dir: Path, tmp_path: Path) -> None:
    full, split = tmp_path / "full", tmp_path / "split"
    assert main(train_args(bin_dir, full, "--max-update", "11")) == 0
    assert main(train_args(bin_dir, split, "--max-update", "5")) == 0  # stops inside epoch 2
    mid = load_checkpoint(split / "checkpoint_last.pt")
    assert mid["num_updates"] == 5 and mid["iterator"]["batch_index"] > 0
    assert main(train_args(bin_dir, split, "--max-update", "11")) == 0
    assert losses(split) == losses(full)
    assert len(losses(full)) == 11
    a = load_checkpoint(full / "checkpoint_last.pt")["model"]
    b = load_checkpoint(split / "checkpoint_last.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_divergence_writes_status_and_exits_zero(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "div"
    args = train_args(bin_dir, save, "--max-epoch", "20", "--divergence-window", "3")
    args[args.index("--lr") + 1] = "50"
    args[args.index("--warmup-updates") + 1] = "1"
    assert main(args) == 0
    status = json.loads((save / "status.json").read_text())
    assert status["status"] == "diverged", status
    assert status["reason"] and status["update"] > 0
    assert read_log(save, "diverged")
    # A re-run does not start over: divergence is a result, not an error.
    assert main(args) == 0
    assert json.loads((save / "status.json").read_text()) == status


def test_unigram_entropy_is_the_targets_cross_entropy(bin_dir: Path) -> None:
    corpus = ParallelCorpus(bin_dir, "train", "xx", "yy")
    counts: dict[int, int] = {}
    for i in range(len(corpus)):
        for t in [*corpus.tgt[i].tolist(), EOS]:
            counts[t] = counts.get(t, 0) + 1
    total = sum(counts.values())
    expected = -sum(c / total * math.log2(c / total) for c in counts.values())
    assert unigram_entropy_bits(corpus.tgt, 24, EOS) == pytest.approx(expected, rel=1e-9)


def test_a_run_that_never_beats_a_unigram_model_stops_as_diverged(bin_dir: Path, tmp_path: Path) -> None:
    # lr 1e-9: the model stays near a uniform guess, above the unigram entropy of the targets.
    frozen = tmp_path / "frozen"
    args = train_args(bin_dir, frozen, "--max-update", "60", "--divergence-window", "30")
    args += ["--divergence-threshold", "unigram", "--warmup-init-lr", "1e-9"]
    args[args.index("--lr") + 1] = "1e-9"
    args[args.index("--warmup-updates") + 1] = "2"
    assert main(args) == 0
    status = json.loads((frozen / "status.json").read_text())
    assert status["status"] == "diverged" and "unigram entropy" in status["reason"], status
    assert status["update"] == 2 + 30  # default divergence_after: warm-up + window
    assert status["criterion"] == "stuck"
    # At a working lr the same model beats the unigram model (mean nll ~3.8 bits against 4.2 over
    # updates 31-60) and completes.
    learning = tmp_path / "learning"
    args = train_args(bin_dir, learning, "--max-epoch", "25", "--divergence-window", "30")
    args[args.index("--lr") + 1] = "1e-2"
    args[args.index("--warmup-updates") + 1] = "30"
    assert main([*args, "--divergence-threshold", "unigram"]) == 0
    assert json.loads((learning / "status.json").read_text())["status"] == "completed"


def test_a_short_run_that_blew_up_never_ends_completed(bin_dir: Path, tmp_path: Path) -> None:
    """RAdam at lr 10 for 60 updates never fills the default 1,000-update window: the end-of-training
    check on the partial window (or the non-finite check) must still call it diverged, and status.json
    says which clause fired."""
    save = tmp_path / "blown"
    args = train_args(
        bin_dir, save, "--max-update", "60", "--optimizer", "radam", "--divergence-threshold", "unigram"
    )
    args[args.index("--lr") + 1] = "10"
    assert main(args) == 0
    status = json.loads((save / "status.json").read_text())
    assert status["status"] == "diverged", status
    assert status["criterion"] in ("worse_than_uniform", "blew_up", "non_finite"), status


@pytest.mark.parametrize(
    "gemm",
    [
        "mkl",
        # oneDNN layers hand their weight gradients to queues the workers share (weight_grad_sharing)
        pytest.param("onednn", marks=pytest.mark.skipif(not onednn_available(), reason="no oneDNN")),
    ],
)
def test_cpu_workers_give_the_sequential_update(
    bin_dir: Path, tmp_path: Path, gemm: str, monkeypatch
) -> None:
    """--cpu-workers 2 runs the two micro-batches of each update in threads: same losses and weights
    as --update-freq 2 run one after the other (up to float rounding), with dropout on."""
    boards: list[SharedWeightGrads] = []

    class Recorded(SharedWeightGrads):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            boards.append(self)

    monkeypatch.setattr(weight_grad_sharing, "SharedWeightGrads", Recorded)
    runs = {}
    for workers in (1, 2):
        save = tmp_path / f"w{workers}"
        args = train_args(bin_dir, save, "--max-update", "6", "--update-freq", "2", "--dropout", "0.3")
        args += ["--cpu-gemm", gemm]
        assert main([*args, "--cpu-workers", str(workers)]) == 0
        runs[workers] = (read_log(save), load_checkpoint(save / "checkpoint_last.pt")["model"])
    (log1, model1), (log2, model2) = runs[1], runs[2]
    assert len(boards) == 6  # one per update of the 2-worker run
    deferred = sum(len(products) for board in boards for products in board.products)
    assert deferred > 0 if gemm == "onednn" else deferred == 0
    assert [r["update"] for r in log1] == [r["update"] for r in log2] == list(range(1, 7))
    assert [r["loss"] for r in log2] == pytest.approx([r["loss"] for r in log1], rel=1e-5)
    for key, value in model1.items():
        torch.testing.assert_close(model2[key], value, rtol=1e-4, atol=1e-6)
    # Not a no-op: training moved the weights, and dropout made a difference to the loss.
    no_dropout = tmp_path / "nodrop"
    assert (
        main(train_args(bin_dir, no_dropout, "--max-update", "6", "--update-freq", "2", "--dropout", "0"))
        == 0
    )
    assert read_log(no_dropout)[0]["loss"] != pytest.approx(log1[0]["loss"], rel=1e-4)


@pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")
def test_onednn_matmuls_train_like_mkl(bin_dir: Path, tmp_path: Path) -> None:
    """--cpu-gemm onednn and mkl: the same run up to float rounding (pipeline_lib/model/linear.py)."""
    runs = {}
    for gemm in ("mkl", "onednn"):
        save = tmp_path / gemm
        assert main(train_args(bin_dir, save, "--max-update", "6", "--cpu-gemm", gemm)) == 0
        runs[gemm] = (read_log(save), load_checkpoint(save / "checkpoint_last.pt")["model"])
    (log_mkl, model_mkl), (log_onednn, model_onednn) = runs["mkl"], runs["onednn"]
    assert [r["loss"] for r in log_onednn] == pytest.approx([r["loss"] for r in log_mkl], rel=1e-4)
    for key, value in model_mkl.items():
        torch.testing.assert_close(model_onednn[key], value, rtol=1e-3, atol=1e-5)


def test_cpu_workers_refuse_what_they_cannot_reproduce(bin_dir: Path, tmp_path: Path, capsys) -> None:
    args = train_args(bin_dir, tmp_path / "x", "--max-update", "1", "--cpu-workers", "2")
    assert main([*args, "--attention-dropout", "0.1"]) == 2
    assert "--attention-dropout 0" in capsys.readouterr().err


def test_crash_is_not_a_divergence(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "crash"
    rc = main(train_args(bin_dir, save, "--max-epoch", "1", "--valid-subset", "nosuchsplit"))
    assert rc == 2
    assert not (save / "status.json").exists()


def test_admin_needs_a_matching_profile(bin_dir: Path, tmp_path: Path, capsys) -> None:
    save = tmp_path / "admin"
    assert main(train_args(bin_dir, save, "--max-update", "2", "--residual", "admin")) == 2
    assert "--admin-profile" in capsys.readouterr().err
    assert (
        main(train_args(bin_dir, save, "--max-update", "2", "--residual", "admin", "--admin-closed-form"))
        == 0
    )
    ckpt = load_checkpoint(save / "checkpoint_last.pt")
    assert ckpt["admin_profile"]["method"] == "closed_form"
    # A profile taken for another architecture is refused.
    from pipeline_lib.model.admin import closed_form_profile
    from pipeline_lib.model.config import ModelConfig

    other = ModelConfig.from_dict({**ckpt["model_config"], "encoder_layers": 3})
    closed_form_profile(other).save(tmp_path / "profile.json")
    args = train_args(bin_dir, tmp_path / "admin2", "--max-update", "2", "--residual", "admin")
    assert main([*args, "--admin-profile", str(tmp_path / "profile.json")]) == 2
    assert "encoder_layers" in capsys.readouterr().err


def test_bf16_keeps_fp32_master_weights(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "bf16"
    assert main(train_args(bin_dir, save, "--max-update", "3", "--amp", "bf16")) == 0
    state = load_checkpoint(save / "checkpoint_last.pt")
    assert all(v.dtype == torch.float32 for v in state["model"].values() if v.is_floating_point())
    assert len(read_log(save)) == 3 and all(r["loss"] == r["loss"] for r in read_log(save))


def test_average_of_identical_checkpoints(bin_dir: Path, tmp_path: Path) -> None:
    save = tmp_path / "avg"
    assert main(train_args(bin_dir, save, "--max-epoch", "2")) == 0
    ckpt = save / "checkpoint2.pt"
    out = tmp_path / "avg.pt"
    assert main(["average", "--inputs", str(ckpt), str(ckpt), str(ckpt), "--output", str(out)]) == 0
    ref, avg = load_checkpoint(ckpt)["model"], load_checkpoint(out)["model"]
    assert all(torch.allclose(avg[k], ref[k], rtol=0, atol=1e-7) for k in ref)
    model, _ = load_model(out)
    assert model.num_parameters() > 0
    # --save-dir form: the mean of checkpoint1 and checkpoint2.
    out2 = tmp_path / "avg2.pt"
    assert (
        main(["average", "--save-dir", str(save), "--num-epoch-checkpoints", "2", "--output", str(out2)]) == 0
    )
    one = load_checkpoint(save / "checkpoint1.pt")["model"]
    mean = load_checkpoint(out2)["model"]
    for k in ref:
        if ref[k].is_floating_point():
            assert torch.allclose(mean[k], (one[k] + ref[k]) / 2, atol=1e-6)
