"""The label-smoothed loss and its gradient on a 3-token vocabulary, worked out by hand (not against
another implementation of the same convention): both the whole-logits loss and the chunked
output-layer loss the CPU trainer uses."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline_lib.train.loss import label_smoothed_nll_loss, output_layer_loss

LN2 = math.log(2)
PAD = 0
EPS = 0.1

# Vocabulary {0 (= pad), 1, 2}; every row's logits are log(1, 2, 1): p = (1/4, 1/2, 1/4).
# fairseq's smoothing: eps_i = eps / (V - 1) = 0.05; the target gets 1 - eps - eps_i on its nll
# plus eps_i on the sum over all V classes, i.e. a target distribution q = (0.05, 0.9, 0.05)
# for target 1 (the weights sum to 1).
#
# row 0, target 1 (p = 1/2): nll = -ln(1/2) = ln 2
#                            smooth = -(ln 1/4 + ln 1/2 + ln 1/4) = (2 + 1 + 2) ln 2 = 5 ln 2
#                            loss = 0.85 * ln 2 + 0.05 * 5 ln 2 = 1.10 ln 2
#                            (check: 0.9 * ln 2 + 0.05 * 2 ln 2 + 0.05 * 2 ln 2 = 1.10 ln 2)
# row 1, target 2 (p = 1/4): nll = 2 ln 2, smooth = 5 ln 2
#                            loss = 0.85 * 2 ln 2 + 0.05 * 5 ln 2 = 1.70 ln 2 + 0.25 ln 2 = 1.95 ln 2
# row 2, target pad: ignored.
# Sums: loss = 3.05 ln 2, nll = 3 ln 2.
# Gradient wrt the logits = p - q per non-pad row:
#   row 0: (1/4 - 0.05, 1/2 - 0.9, 1/4 - 0.05) = (0.2, -0.4, 0.2)
#   row 1: (1/4 - 0.05, 1/2 - 0.05, 1/4 - 0.9) = (0.2, 0.45, -0.65)
#   row 2: (0, 0, 0)
LOGITS = [[0.0, LN2, 0.0]] * 3
TARGET = [1, 2, PAD]
WANT_LOSS = 3.05 * LN2
WANT_NLL = 3.0 * LN2
WANT_GRAD = [[0.2, -0.4, 0.2], [0.2, 0.45, -0.65], [0.0, 0.0, 0.0]]
# eps = 0: the loss is the nll, the gradient p - onehot.
WANT_GRAD_NO_SMOOTHING = [[0.25, -0.5, 0.25], [0.25, 0.5, -0.75], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("eps", "want_loss", "want_grad"), [(EPS, WANT_LOSS, WANT_GRAD), (0.0, WANT_NLL, WANT_GRAD_NO_SMOOTHING)]
)
def test_label_smoothed_loss_by_hand(eps: float, want_loss: float, want_grad: list) -> None:
    logits = torch.tensor(LOGITS, dtype=torch.float64, requires_grad=True)
    loss, nll = label_smoothed_nll_loss(logits, torch.tensor(TARGET), eps, PAD)  # fp32 inside
    assert loss.item() == pytest.approx(want_loss, rel=1e-6)
    assert nll.item() == pytest.approx(WANT_NLL, rel=1e-6)
    loss.backward()
    torch.testing.assert_close(logits.grad, torch.tensor(want_grad, dtype=torch.float64), rtol=0, atol=1e-6)


@pytest.mark.parametrize(("eps", "want_loss"), [(EPS, WANT_LOSS), (0.0, WANT_NLL)])
@pytest.mark.parametrize("chunk_rows", [1, 2, 3])
def test_chunked_output_layer_loss_by_hand(eps: float, want_loss: float, chunk_rows: int) -> None:
    # hidden @ I = the logits above; the weight gradient is then hidden^T @ dlogits.
    hidden = torch.tensor(LOGITS, requires_grad=True)
    weight = torch.eye(3, requires_grad=True)
    loss, nll = output_layer_loss(hidden, weight, torch.tensor(TARGET), eps, PAD, chunk_rows=chunk_rows)
    assert loss.item() == pytest.approx(want_loss, rel=1e-6)
    assert nll.item() == pytest.approx(WANT_NLL, rel=1e-6)
    loss.backward()
    dlogits = torch.tensor(WANT_GRAD if eps else WANT_GRAD_NO_SMOOTHING)
    torch.testing.assert_close(hidden.grad, dlogits, rtol=0, atol=1e-6)
    torch.testing.assert_close(weight.grad, dlogits.T @ torch.tensor(LOGITS), rtol=0, atol=1e-6)
