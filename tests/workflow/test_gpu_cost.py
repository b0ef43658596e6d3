"""Training GPU-hours from measured rates: the rate table is the bench results', the rows are picked
by card, precision, width and batch, and the En-Fr plan prices every experiment on 80 and 141 GB."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from pipeline_lib.workflow.cli_check_config import check
from pipeline_lib.workflow.cli_plan import render_batches, training_cost
from pipeline_lib.workflow.gpu_cost import (
    RATES_FILE,
    Rate,
    epoch_target_tokens,
    flops_per_target_token,
    gpu_hours,
    load_rates,
    pick_rate,
)
from pipeline_lib.workflow.plan import Plan

REPO = Path(__file__).resolve().parents[2]


def test_the_rate_table_is_what_the_bench_results_give():
    built = load_bench_script("gpu_rates").build()
    assert json.loads(RATES_FILE.read_text()) == built, "run python bench/gpu_rates.py"
    h200 = [r for r in built if "H200" in r["card"]]
    flagship = next(r for r in h200 if r["encoder_layers"] == 60)
    assert flagship["max_tokens"] == 3584 and 0.02 < flagship["mfu"] < 0.04  # the 3.0%


def test_flops_per_token_match_the_benchmarks_formula():
    compare = load_bench_script("compare")
    shape = compare.Shape(60, 12, 512, 2048, 8)
    theirs = compare.train_flops_per_target_token([32] * 10, [32] * 10, 40000, shape)[
        "flops_per_target_token"
    ]
    assert flops_per_target_token(60, 12, 512, 2048, 40000, length=32) == pytest.approx(theirs, rel=1e-9)


def _rate(**kw) -> Rate:
    row = dict(card="NVIDIA H200", memory_gb=141, encoder_layers=6, decoder_layers=6, d_model=512,
               max_tokens=16384, precision="bf16", tokens_per_s=1.0, flops_per_target_token=1.0,
               matmul_peak_gflops=800_000.0, mfu=0.12, source="x")  # fmt: skip
    return Rate(**{**row, **kw})


def test_the_row_is_picked_by_card_precision_width_then_batch():
    rates = (
        _rate(d_model=512, max_tokens=3584, mfu=0.03),
        _rate(d_model=512, max_tokens=16384, mfu=0.12),
        _rate(d_model=1024, mfu=0.32),
        _rate(card="NVIDIA H100 80GB HBM3", memory_gb=80, precision="fp16", mfu=0.1),
    )
    pick = lambda **kw: pick_rate(rates, **{"memory_gb": 141, "name": None, "precision": "fp16", **kw})  # noqa: E731
    assert pick(d_model=512, max_tokens=28672).mfu == 0.12  # bf16 stands in for fp16; nearest batch
    assert pick(d_model=512, max_tokens=2048).mfu == 0.03
    assert pick(d_model=1024, max_tokens=2048).mfu == 0.32  # width before batch
    between = pick(d_model=724, max_tokens=16384)  # sqrt(512 x 1024): halfway on log(d)
    assert between.mfu == pytest.approx((0.12 + 0.32) / 2, abs=1e-3) and between.d_model == 724
    assert pick(d_model=2048, max_tokens=2048).mfu == 0.32  # beyond the widest: its row
    assert pick(d_model=512, max_tokens=1, memory_gb=80).mfu == 0.1
    assert pick(d_model=512, max_tokens=1, memory_gb=16) is None  # no measured 16 GB card
    assert pick(d_model=512, max_tokens=1, precision="none") is None  # no fp32 row
    assert pick(d_model=512, max_tokens=1, memory_gb=0, name="H100").memory_gb == 80


def test_gpu_hours_scale_with_tokens_and_flops():
    rate = _rate(mfu=0.1, matmul_peak_gflops=1000.0)  # 1e11 FLOP/s
    assert gpu_hours(3600 * 1e11 / 1e9, 1e9, rate) == pytest.approx(1.0)
    assert gpu_hours(3600 * 1e11 / 1e9, 2e9, rate) == pytest.approx(2.0)


def test_epoch_tokens_from_binarized_data_else_the_estimate():
    ds = {"train_target_tokens": 1000, "mono": {"recipe": "news-crawl-fr", "max_lines": 10}}
    assert epoch_target_tokens(ds, None, 777) == 777
    assert epoch_target_tokens(ds, None, None) == 1000
    assert epoch_target_tokens(ds, {"upsample_real": 2}, None) == 2000 + 10 * 32
    assert epoch_target_tokens({}, None, None) is None


def _enfr(memory_gb: float) -> Plan:
    config = copy.deepcopy(check([REPO / "config.wmt14_en_fr.yaml"], REPO).config)
    config["card"] = {"memory_gb": memory_gb}
    return Plan(config)


@pytest.mark.parametrize("memory_gb", [80, 141])
def test_the_en_fr_plan_prices_every_experiment_below_its_runtime_cap(memory_gb: float, monkeypatch):
    monkeypatch.chdir(REPO)
    plan = _enfr(memory_gb)
    for name in plan.experiments:
        cost = training_cost(plan, name)
        assert cost.rate is not None and cost.rate.memory_gb == memory_gb, name
        assert cost.tokens == 50 * 1_150_000_000 or plan.experiments[name].get("backtranslation"), name
        assert 0 < cost.estimate_gpu_hours < cost.requested_gpu_hours, name
    text = render_batches(plan)
    assert "GPU-hours (measured rate)" in text and "**train total**" in text


def test_a_card_without_measurements_is_shaped_but_not_priced(monkeypatch):
    monkeypatch.chdir(REPO)
    plan = _enfr(16)
    assert training_cost(plan, "enfr_60L12L_admin").estimate_gpu_hours is None
    assert "Not priced" in render_batches(plan)
    assert load_rates()  # the table is read once and cached
