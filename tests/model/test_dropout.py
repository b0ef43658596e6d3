"""The generator-driven dropout used in training on a CPU (pipeline_lib/model/dropout.py)."""

from __future__ import annotations

import torch

from pipeline_lib.model.dropout import Dropout, dropout_generator, keep_mask


def test_keep_mask_rate_is_one_minus_p_and_unbiased_across_lanes():
    gen = torch.Generator().manual_seed(0)
    for p in (0.1, 0.3, 0.5):
        mask = keep_mask(torch.Size([400_000]), p, gen, torch.device("cpu"))
        assert abs(mask.float().mean().item() - (1 - p)) < 0.005
        # every 16-bit lane of a 64-bit draw is used alike (a lane without its sign bit would never drop)
        lanes = mask.view(-1, 4).float().mean(dim=0)
        assert torch.allclose(lanes, torch.full((4,), 1 - p), atol=0.01), lanes


def test_dropout_scales_kept_values_and_is_reproducible_from_the_generator():
    layer = Dropout(0.25).train()
    x = torch.randn(64, 33)
    outs = []
    for _ in range(2):
        with dropout_generator(torch.Generator().manual_seed(7)):
            outs.append(layer(x))
    assert torch.equal(outs[0], outs[1])
    kept = outs[0] != 0
    assert 0.6 < kept.float().mean() < 0.9
    torch.testing.assert_close(outs[0][kept], x[kept] / 0.75)
    with dropout_generator(torch.Generator().manual_seed(8)):
        assert not torch.equal(layer(x), outs[0])
    # gradient flows through the kept elements only, with the same scale
    x.requires_grad_(True)
    with dropout_generator(torch.Generator().manual_seed(7)):
        layer(x).sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)
    # no generator (decoding, CUDA) or eval mode: torch's own dropout
    assert torch.equal(layer.eval()(x), x)
