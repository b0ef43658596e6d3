"""One model shared by threads (training --cpu-workers, translate --workers) keeps no per-call state."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from pipeline_lib.cpu.threads import single_intra_op_thread
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model


@pytest.mark.parametrize("residual", ["post_ln", "dlcl"])
def test_concurrent_forward_passes_match_sequential_ones(residual):
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=50, tgt_vocab_size=50, encoder_layers=4, decoder_layers=3, d_model=64,
        ffn_dim=128, heads=4, dropout=0.0, residual=residual,
    )  # fmt: skip
    model = build_model(cfg).eval()
    inputs = [torch.randint(4, 50, (16, 12 + 5 * i)) for i in range(4)]
    with torch.no_grad():
        expected = [model(x, x) for x in inputs]

        def run(i: int) -> torch.Tensor:
            return model(inputs[i % 4], inputs[i % 4])

        with single_intra_op_thread(), ThreadPoolExecutor(4) as pool:
            outputs = list(pool.map(run, range(32)))
    for i, out in enumerate(outputs):
        torch.testing.assert_close(out, expected[i % 4], rtol=1e-5, atol=1e-5)
