"""fairseq's Adam and Transformer-Clinic's RAdam against their formulas, element by element.

The expected values are computed here in Python floats from the authors' lines (TC@70f72b7
fairseq/fairseq/optim/adam.py:157-177, radam_fairseq/radam.py:105-126), not by the code under test:

    m = b1 m + (1 - b1) g ;  v = b2 v + (1 - b2) g^2
    Adam:  p <- p - wd lr p - lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
    RAdam: p <- p - wd lr p                                 while N_sma(t) < 5
           p <- p - wd lr p - lr sqrt(r_t) / (1 - b1^t) * m / (sqrt(v) + eps)   after
"""

from __future__ import annotations

import math

import pytest
import torch

from pipeline_lib.train.config import TrainConfig
from pipeline_lib.train.optimizers import (
    DeepnmtRAdam,
    FairseqAdam,
    TransformerClinicRAdam,
    radam_sma_length,
)

P0 = [1.0, -2.0, 0.5, 3.0]
GRADS = [[0.1, -0.3, 0.0, 2.0], [0.2, 0.1, -0.05, -1.0], [-0.4, 0.3, 0.02, 0.5]]
LR, BETAS, EPS, WD = 0.01, (0.9, 0.98), 1e-8, 0.1


def run(cls: type, grads: list[list[float]], **kw: float) -> list[float]:
    p = torch.nn.Parameter(torch.tensor(P0, dtype=torch.float64).float())
    opt = cls([p], lr=kw.get("lr", LR), betas=BETAS, eps=kw.get("eps", EPS), weight_decay=kw.get("wd", WD))
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    return p.detach().double().tolist()


def by_hand(grads: list[list[float]], step_size, wd: float = WD, eps: float = EPS) -> list[float]:  # noqa: ANN001
    b1, b2 = BETAS
    out = []
    for i, p in enumerate(P0):
        m = v = 0.0
        for t, g in enumerate(grads, start=1):
            m = b1 * m + (1 - b1) * g[i]
            v = b2 * v + (1 - b2) * g[i] ** 2
            p = p - wd * LR * p
            size = step_size(t)
            if size is not None:
                p = p - size * m / (math.sqrt(v) + eps)
        out.append(p)
    return out


def adam_size(t: int) -> float:
    return LR * math.sqrt(1 - BETAS[1] ** t) / (1 - BETAS[0] ** t)


def radam_size(t: int) -> float | None:
    b1, b2 = BETAS
    n_max = 2 / (1 - b2) - 1
    n = n_max - 2 * t * b2**t / (1 - b2**t)
    if n < 5:
        return None
    return (
        LR * math.sqrt((1 - b2**t) * (n - 4) / (n_max - 4) * (n - 2) * n_max / n / (n_max - 2)) / (1 - b1**t)
    )


@pytest.mark.parametrize("steps", [1, 3])
def test_one_and_three_adam_steps_with_decay_equal_the_formula(steps: int) -> None:
    got = run(FairseqAdam, GRADS[:steps])
    assert got == pytest.approx(by_hand(GRADS[:steps], adam_size), rel=1e-6, abs=1e-7)


def test_adam_decay_is_decoupled_not_added_to_the_gradient() -> None:
    # a zero gradient: torch's coupled decay would take a full Adam step on wd * p (about lr per
    # weight); fairseq's moves each weight by wd * lr * p alone
    got = run(FairseqAdam, [[0.0] * 4])
    assert got == pytest.approx([p * (1 - WD * LR) for p in P0], rel=1e-6)


def test_adam_without_decay_and_eps_is_torch_adam() -> None:
    # the one case where the two formulas coincide (eps = 0, no decay): an independent oracle
    grads = GRADS[1:]  # no zero gradient: 0 / 0 at eps 0
    p = torch.nn.Parameter(torch.tensor(P0))
    torch_adam = torch.optim.Adam([p], lr=LR, betas=BETAS, eps=0.0)
    for g in grads:
        p.grad = torch.tensor(g)
        torch_adam.step()
    got = run(FairseqAdam, grads, eps=0.0, wd=0.0)
    assert got == pytest.approx(p.detach().tolist(), rel=1e-6)


def test_radam_sma_length_crosses_five_at_update_six_for_beta2_098() -> None:
    lengths = [radam_sma_length(0.98, t)[0] for t in range(1, 8)]
    assert lengths[0] == pytest.approx(1.0)  # 99 - 2 * 0.98 / 0.02
    assert [n >= 5 for n in lengths] == [False] * 5 + [True] * 2


def test_radam_leaves_the_weights_alone_but_for_decay_while_sma_is_below_five() -> None:
    grads = [[0.3, -0.7, 1.5, -2.0]] * 5
    got = run(TransformerClinicRAdam, grads)
    assert got == pytest.approx([p * (1 - WD * LR) ** 5 for p in P0], rel=1e-6)
    # torch's RAdam moves them (an unrectified momentum step): the difference this class removes
    p = torch.nn.Parameter(torch.tensor(P0))
    torch_radam = torch.optim.RAdam([p], lr=LR, betas=BETAS, eps=EPS)
    for g in grads:
        p.grad = torch.tensor(g)
        torch_radam.step()
    assert p.detach().tolist() != pytest.approx(P0, rel=1e-3)


def test_radam_rectified_steps_equal_the_formula() -> None:
    grads = (GRADS * 3)[:8]  # steps 6, 7 and 8 are rectified at beta2 0.98
    got = run(TransformerClinicRAdam, grads)
    assert got == pytest.approx(by_hand(grads, radam_size), rel=1e-6, abs=1e-7)


def test_deepnmts_radam_takes_a_momentum_step_while_sma_is_below_five() -> None:
    # deepnmt/radam.py:117-119: p -= wd lr p + lr / (1 - b1^t) * m, no denominator
    got = run(DeepnmtRAdam, GRADS)
    expected = []
    for i, p in enumerate(P0):
        m = 0.0
        for t, g in enumerate(GRADS, start=1):
            m = BETAS[0] * m + (1 - BETAS[0]) * g[i]
            p = p - WD * LR * p - LR / (1 - BETAS[0] ** t) * m
        expected.append(p)
    assert radam_size(len(GRADS)) is None and got == pytest.approx(expected, rel=1e-6)


def test_fp16_parameters_are_updated_through_fp32_and_rounded_once() -> None:
    p16 = torch.nn.Parameter(torch.tensor(P0).half())
    opt = FairseqAdam([p16], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    p16.grad = torch.tensor(GRADS[0]).half()
    opt.step()
    expected = torch.tensor(by_hand(GRADS[:1], adam_size, wd=WD)).float().half()
    assert p16.dtype == torch.float16 and torch.equal(p16.detach(), expected)
    assert opt.state[p16]["exp_avg"].dtype == torch.float32


def test_a_torch_adam_checkpoint_state_loads() -> None:
    p = torch.nn.Parameter(torch.tensor(P0))
    torch_adam = torch.optim.Adam([p], lr=LR, betas=BETAS, eps=EPS)
    p.grad = torch.tensor(GRADS[0])
    torch_adam.step()
    ours = FairseqAdam([p], lr=LR, betas=BETAS, eps=EPS)
    ours.load_state_dict(torch_adam.state_dict())
    p.grad = torch.tensor(GRADS[1])
    ours.step()
    assert ours.state[p]["step"] == 2


@pytest.mark.parametrize("optimizer", ["adam", "radam", "radam_deepnmt"])
def test_the_trainer_builds_the_authors_optimizer(optimizer: str) -> None:
    from pipeline_lib.train.build import build_optimizer

    cfg = TrainConfig(
        data="d", source_lang="xx", target_lang="yy", save_dir="s", optimizer=optimizer, max_update=1,
        weight_decay=WD,
    )  # fmt: skip
    opt = build_optimizer(cfg, [torch.nn.Parameter(torch.zeros(2))])
    assert isinstance(
        opt, {"adam": FairseqAdam, "radam": TransformerClinicRAdam, "radam_deepnmt": DeepnmtRAdam}[optimizer]
    )
    assert opt.param_groups[0]["weight_decay"] == WD
