"""Mutation gaps of validation (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: the dev loss recomputed with torch's own cross-entropy over every
pair, sentence by sentence, and log records and messages written out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.data.indexed import split_prefix, write_dataset
from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.train.build import Context, build_optimizer, build_scaler
from pipeline_lib.train.collectives import Ranks
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.run_log import JsonlLog
from pipeline_lib.train.split_data import SplitData
from pipeline_lib.train.tensorboard_log import TensorBoardLog
from pipeline_lib.train.update import Updater
from pipeline_lib.train.validation import BestLoss, Validation, validate, validate_interval
from tests.train.test_split_data_mutation_gaps import BOS, EOS, PAD, SRC, TGT, split_data

VOCAB = 90


def updater(rank: int = 0, world: int = 1) -> Updater:
    cfg = TrainConfig(
        data="d", source_lang="en", target_lang="fr", save_dir="s", max_update=10, label_smoothing=0.0
    )
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(
            VOCAB, VOCAB, pad_idx=PAD, encoder_layers=1, decoder_layers=1, d_model=16, ffn_dim=32, heads=2
        )
    )
    model.train()  # validate must switch dropout off itself
    params = list(model.parameters())
    cpu = torch.device("cpu")
    return Updater(
        cfg, Context(VOCAB, None, PAD, BOS, EOS), model, params, build_optimizer(cfg, params),
        build_scaler(cfg, cpu), Ranks(cpu, False, world, rank), None, chunked_loss=False,
    )  # fmt: skip


def reference(model, pairs: list[tuple[list[int], list[int]]]) -> tuple[float, int]:
    """(summed nll in nats, target tokens) one sentence at a time, no padding."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for src, tgt in pairs:
            logits = model(torch.tensor([src + [EOS]]), torch.tensor([[BOS] + tgt]))
            total += F.cross_entropy(logits[0], torch.tensor(tgt + [EOS]), reduction="sum").item()
            tokens += len(tgt) + 1
    return total, tokens


def test_the_dev_loss_is_bits_per_target_token_over_every_kept_pair(tmp_path: Path) -> None:
    data = split_data(tmp_path, max_tokens=8)  # pairs 3 and 4 are too long: not part of the dev loss
    up = updater()
    result = validate(up, data, seed=1)
    nats, tokens = reference(up.model, [(SRC[i], TGT[i]) for i in (0, 1, 2, 5, 6)])
    assert result["ntokens"] == tokens == 3 + 2 + 4 + 5 + 7
    assert result["loss"] == pytest.approx(nats / tokens / math.log(2), rel=1e-5)
    assert result["nll_loss"] == pytest.approx(result["loss"], rel=1e-6)  # no label smoothing
    assert result["ppl"] == pytest.approx(2 ** (nats / tokens / math.log(2)), rel=1e-5)
    assert not up.model.training


def test_each_rank_validates_its_own_share_of_the_batches(tmp_path: Path) -> None:
    data = split_data(tmp_path, max_tokens=1000, max_positions=8, max_sentences=1)  # one pair a batch
    shares = [validate(updater(rank, 2), data, seed=1)["ntokens"] for rank in (0, 1)]
    # by length: pairs 1, 0, 2, 5, 6 with 2, 3, 4, 5, 7 target tokens; rank 0 takes batches 0, 2, 4
    assert shares == [2 + 4 + 7, 3 + 5]


@pytest.mark.parametrize(
    "setting, planned, expected",
    [(0, 100, 0), (7, 100, 7), (-1, 100, 10), (-1, 101, 11), (-1, 5, 1), (-1, 0, 1)],
)
def test_validate_interval(setting: int, planned: int, expected: int) -> None:
    assert validate_interval(setting, planned) == expected


def test_best_loss_is_strictly_lower_and_counts_validations_since() -> None:
    best = BestLoss()
    assert best.to_json() is None
    assert best.add(3.0, 10, 1) and (best.loss, best.update, best.epoch, best.since) == (3.0, 10, 1, 0)
    assert not best.add(3.0, 20, 1) and best.since == 1  # equal is not better (fairseq)
    assert not best.add(4.0, 30, 2) and best.since == 2
    assert (
        best.add(2.5, 40, 2) and best.to_json() == {"loss": 2.5, "update": 40, "epoch": 2} and best.since == 0
    )


def test_best_loss_from_records_reads_finite_dev_losses_only() -> None:
    records = [
        {"kind": "train", "loss": 0.1, "update": 1, "epoch": 1},
        {"kind": "valid", "loss": 5.0, "update": 2, "epoch": 1},
        {"kind": "valid", "loss": math.nan, "update": 3, "epoch": 1},
        {"kind": "valid", "update": 4, "epoch": 1},  # no loss
        {"kind": "valid", "loss": 4.0, "update": 5, "epoch": 2},
        {"kind": "valid", "loss": 4.5, "update": 6, "epoch": 2},
    ]
    best = BestLoss.from_records(records)
    assert (best.loss, best.update, best.epoch, best.since) == (4.0, 5, 2, 1)


def test_a_validation_is_logged_printed_and_judged(tmp_path: Path, capsys) -> None:
    data = split_data(tmp_path / "data", max_tokens=8)
    up = updater()
    log = JsonlLog(tmp_path / "log.jsonl", enabled=True)
    validation = Validation(up, data, 1, log, TensorBoardLog(tmp_path, False, None), BestLoss(loss=1e9))
    assert validation.run(epoch=2, update=30, mid_epoch=True) is True
    assert validation.run(epoch=3, update=40) is False  # the same weights: not strictly better
    [first, second] = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert first == {"kind": "valid", "epoch": 2, "update": 30, **validation.last, "mid_epoch": True}
    assert second == {"kind": "valid", "epoch": 3, "update": 40, **validation.last}
    r = validation.last
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"epoch 2 update 30: valid loss {r['loss']:.3f} nll {r['nll_loss']:.3f} ppl {r['ppl']:.2f} (best)",
        f"epoch 3 update 40: valid loss {r['loss']:.3f} nll {r['nll_loss']:.3f} ppl {r['ppl']:.2f}",
    ]
    assert validation.best.update == 30 and validation.best.since == 1


def test_only_the_main_rank_prints(tmp_path: Path, capsys) -> None:
    data = split_data(tmp_path / "data", max_tokens=8)
    log = JsonlLog(tmp_path / "log.jsonl", enabled=False)
    Validation(updater(1, 2), data, 1, log, TensorBoardLog(tmp_path, False, None)).run(1, 5)
    assert capsys.readouterr().err == ""


def test_a_resumed_best_is_kept_and_nothing_is_reported_before_a_validation(tmp_path: Path) -> None:
    """status.json's "valid" is null until a validation ran; a resumed run's best (rebuilt from its
    log) is the one a new dev loss must beat."""
    data = split_data(tmp_path / "data", max_tokens=8)
    log = JsonlLog(tmp_path / "log.jsonl", enabled=False)
    resumed = BestLoss(loss=0.5, update=40, epoch=2)
    validation = Validation(updater(), data, 1, log, TensorBoardLog(tmp_path, False, None), resumed)
    assert validation.last is None and validation.best is resumed
    assert validation.run(3, 50) is False  # an untrained model's loss is far above 0.5
    assert (resumed.update, resumed.since) == (40, 1)


def test_the_dev_loss_is_summed_in_float64(tmp_path: Path) -> None:
    """A large dev set's loss: per-batch float32 losses summed in float64 (a float32 sum of 400 terms
    is off by ~1e-7 relative)."""
    rng = np.random.default_rng(0)
    src = [rng.integers(4, VOCAB, size=int(rng.integers(1, 6))).tolist() for _ in range(400)]
    tgt = [rng.integers(4, VOCAB, size=int(rng.integers(1, 6))).tolist() for _ in range(400)]
    write_dataset(split_prefix(tmp_path, "valid", "en"), src)
    write_dataset(split_prefix(tmp_path, "valid", "fr"), tgt)
    data = SplitData(str(tmp_path), "valid", "en", "fr", 1000, 100, 1, PAD, BOS, EOS)  # one pair a batch
    up = updater()
    result = validate(up, data, seed=1)
    total = 0.0
    with torch.no_grad():
        for indices in data.batches(1, 0, shuffle=False):
            total += float(up.forward_loss(data.collate(indices), up.model)[0])
    assert result["ntokens"] == sum(len(t) + 1 for t in tgt)
    assert result["loss"] * result["ntokens"] * math.log(2) == pytest.approx(total, rel=1e-12)


def test_a_dev_set_of_one_token_is_divided_by_one(tmp_path: Path) -> None:
    write_dataset(split_prefix(tmp_path, "valid", "en"), [[5, 6]])
    write_dataset(split_prefix(tmp_path, "valid", "fr"), [[]])  # the target is </s> alone
    data = SplitData(str(tmp_path), "valid", "en", "fr", 1000, 100, None, PAD, BOS, EOS)
    up = updater()
    result = validate(up, data, seed=1)
    nats, tokens = reference(up.model, [([5, 6], [])])
    assert tokens == result["ntokens"] == 1
    assert result["loss"] == pytest.approx(nats / math.log(2), rel=1e-5)
