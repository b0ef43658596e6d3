"""Property: ``average --save-dir --num-update-checkpoints N`` is the element-wise mean of the
newest N interval checkpoints, for any number of checkpoints, any N and any update numbers."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_lib.checkpoint import interval_path, load_checkpoint, save_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

CONFIG = ModelConfig(
    src_vocab_size=8, tgt_vocab_size=8, encoder_layers=1, decoder_layers=1, d_model=8, ffn_dim=8, heads=1
)
SHAPES = {name: v.shape for name, v in build_model(CONFIG).state_dict().items()}


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(
    st.lists(st.integers(1, 10_000), min_size=1, max_size=5, unique=True),
    st.data(),
)
def test_average_is_the_mean_of_the_newest_n(updates: list[int], data: st.DataObject) -> None:
    n = data.draw(st.integers(1, len(updates)))
    with tempfile.TemporaryDirectory() as tmp:
        save_dir = Path(tmp)
        weights = {}
        for update in updates:  # written in random order: the names, not the order, give the position
            gen = torch.Generator().manual_seed(update)
            state = {name: torch.randn(shape, generator=gen) for name, shape in SHAPES.items()}
            weights[update] = state
            save_checkpoint(
                {
                    "model_config": CONFIG.to_dict(),
                    "model": state,
                    "num_updates": update,
                    "epoch": 1,
                    "status": "ok",
                },
                interval_path(save_dir, 1, update),
            )
        out = save_dir / "avg.pt"
        assert (
            main(["average", "--save-dir", tmp, "--num-update-checkpoints", str(n), "--output", str(out)])
            == 0
        )
        newest = sorted(updates)[-n:]
        averaged = load_checkpoint(out)["model"]
        for name in SHAPES:
            want = torch.stack([weights[u][name] for u in newest]).mean(dim=0)
            torch.testing.assert_close(averaged[name], want, rtol=0, atol=1e-6)
