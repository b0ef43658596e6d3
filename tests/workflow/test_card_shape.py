"""Jobs shaped to the card: the En-Fr paper config on 16, 80 and 141 GB cards keeps every experiment's
tokens per update, fits the memory estimate, submits the GPUs and nodes it trains on, and trains
under one run identity whatever the card."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pytest

from pipeline_lib.cli import build_parser
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.cli_args import model_config_from_args
from pipeline_lib.slurm_launch import TrainShape
from pipeline_lib.train.cli import train_config_from_args
from pipeline_lib.train.run_identity import run_identity
from pipeline_lib.workflow import Commands
from pipeline_lib.workflow.card_shape import JobShape, gpu_counts, shape_for_card, token_cap
from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.plan import Plan

REPO = Path(__file__).resolve().parents[2]
ENFR = "config.wmt14_en_fr.yaml"
CARDS_GB = (16, 80, 141)


def _plan(memory_gb: float | None) -> Plan:
    plan = check([REPO / ENFR], REPO)
    if memory_gb is None:
        return plan
    config = copy.deepcopy(plan.config)
    config["card"] = {"memory_gb": memory_gb}
    return Plan(config)


def _identity(plan: Plan, name: str, tmp_path: Path) -> str:
    argv = shlex.split(Commands(plan).train(name, threads=1))
    args = build_parser("train").parse_args(["train", *argv, "--device", "cuda"])  # as on the cluster
    train = train_config_from_args(args).to_dict()
    train["data"] = str(tmp_path)  # the same (absent) data for every card: only the settings count
    gpus = plan.resources(name, "train")["gpu"]
    return run_identity(train, model_config_from_args(args, 40000, 40000).to_dict(), world_size=gpus)["id"]


@pytest.mark.parametrize("memory_gb", CARDS_GB)
def test_every_experiment_keeps_its_tokens_per_update_and_fits_the_card(memory_gb: float):
    plan = _plan(memory_gb)
    assert plan.card is not None
    for name in plan.experiments:
        authors, shape = plan.authors_shape(name), plan.train_shape(name)
        # TC's 60L-12L script: 5,000 x 16 GPUs x 16; every other row the recipe's 3,584 x 8 x 16
        want = 1_280_000 if name.startswith("enfr_60L12L") else 458_752
        assert shape is not None and shape.tokens_per_update == authors.tokens_per_update == want, name
        assert shape.gpus <= authors.gpus, name
        assert plan.memory_estimate_gb(name, shape.max_tokens, shape.update_freq) <= plan.card.usable_gb, name
        # the job submits what it trains on: launcher shape = GPUs of the shape, whole nodes beyond 8
        resources = plan.resources(name, "train")
        job = TrainShape.from_resources(resources)
        assert job.world_size == shape.gpus and job.nodes == max(1, shape.gpus // 8), name
        configured = plan.configured_resources(name, "train")
        longest = max(plan.configured_resources(n, "train")["runtime"] for n in plan.experiments)
        want = min(configured["runtime"] * authors.gpus // shape.gpus, longest)
        assert resources["runtime"] == want, name
        args = build_parser("train").parse_args(["train", *shlex.split(Commands(plan).train(name))])
        assert (args.max_tokens, args.update_freq) == (shape.max_tokens, shape.update_freq), name


def test_a_bigger_card_takes_bigger_batches_and_less_accumulation():
    small, large = _plan(16), _plan(141)
    for name in small.experiments:
        a, b = small.train_shape(name), large.train_shape(name)
        assert a is not None and b is not None
        assert b.max_tokens >= a.max_tokens and b.update_freq <= a.update_freq, name
    # TC's 5,000 tokens per GPU at 60L-12L (17.0 GB estimated) do not fit a 16 GB card's 12.6 usable:
    # the same 1,280,000-token update in smaller pieces; 141 GB takes it in two
    assert small.train_shape("enfr_60L12L_default") == JobShape(16, 3200, 25)
    assert small.train_shape("enfr_60L12L_admin") == JobShape(16, 3200, 25)
    assert large.train_shape("enfr_60L12L_admin") == JobShape(16, 40_000, 2)
    # a 12L-12L at the recipe's 3,584 x 8 x 16: a 141 GB card needs half the GPUs, no accumulation
    assert large.train_shape("enfr_12L12L_admin") == JobShape(8, 57_344, 1)


def test_the_run_identity_is_the_same_on_every_card(tmp_path: Path):
    plans = {gb: _plan(gb) for gb in (None, *CARDS_GB)}
    for name in ("enfr_6L6L_admin", "enfr_60L12L_admin", "enfr_6L6L_big_bt"):
        shapes = {plans[gb].train_shape(name) for gb in CARDS_GB}
        assert len(shapes) > 1, f"{name}: the cards should split the batch differently"
        ids = {gb: _identity(plan, name, tmp_path) for gb, plan in plans.items()}
        assert len(set(ids.values())) == 1, (name, ids)


def test_another_tokens_per_update_is_another_run(tmp_path: Path):
    plan = _plan(80)
    config = copy.deepcopy(plan.config)
    config["recipes"]["enfr"]["update_freq"] = (
        4  # the recipe's 16-GPU rows now take 229,376 tokens per update
    )
    other = Plan(config)
    assert other.train_shape("enfr_12L12L_admin").tokens_per_update == 229_376
    assert _identity(plan, "enfr_12L12L_admin", tmp_path) != _identity(other, "enfr_12L12L_admin", tmp_path)


def test_without_a_card_the_jobs_keep_the_authors_shape():
    plan = _plan(None)
    assert plan.train_shape("enfr_60L12L_admin") is None
    assert plan.resources("enfr_60L12L_admin", "train")["nodes"] == 2
    assert plan.train_recipe("enfr_60L12L_admin")["update_freq"] == 16  # TC's wmt14_en-fr.md


def test_shape_rule():
    # the fewest GPUs (powers of two up to a node, then whole nodes) that need no accumulation
    assert gpu_counts(16, 8) == [1, 2, 4, 8, 16]
    assert shape_for_card(458_752, 16, 60_000, 8) == JobShape(8, 57_344, 1)
    assert shape_for_card(458_752, 16, 57_343, 8) == JobShape(16, 28_672, 1)
    # when the authors' count still accumulates: their count, the smallest exact update_freq
    assert shape_for_card(458_752, 16, 10_000, 8) == JobShape(16, 7168, 4)
    assert shape_for_card(458_752, 4, 1_000_000, 8) == JobShape(1, 458_752, 1)
    with pytest.raises(ConfigError, match="not even one token"):
        shape_for_card(458_752, 16, 0, 8)


def test_token_cap_is_the_largest_batch_that_fits():
    def peak(tokens: int) -> float:
        return 2.0 + tokens * 1e-4

    cap = token_cap(peak, 10.0)
    assert peak(cap) <= 10.0 < peak(cap + 1)
    assert token_cap(peak, 1.0) == 0
