"""The memory estimate behind the plan's "memory per GPU" column, checked against what autograd saves."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.memory_estimate import (
    Shape,
    estimate_training_memory,
    parameter_count,
    saved_values_per_token,
)

VOCAB, SENTENCES = 200, 8


def _model(enc: int, dec: int, d: int, ffn: int, heads: int, residual: str = "post_ln"):
    torch.manual_seed(0)
    cfg = ModelConfig(VOCAB, VOCAB, encoder_layers=enc, decoder_layers=dec, d_model=d, ffn_dim=ffn,
                      heads=heads, dropout=0.1, attention_dropout=0.1, activation_dropout=0.1,
                      residual=residual)  # fmt: skip
    return build_model(cfg).train()


def _saved_bytes(model, length: int) -> int:
    """Bytes of the distinct non-parameter storages autograd saves for one forward pass and loss."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            storages[st.data_ptr()] = st.nbytes()
        return t

    src = torch.randint(4, VOCAB, (SENTENCES, length))
    prev = torch.randint(4, VOCAB, (SENTENCES, length))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(src, prev)
        F.cross_entropy(logits.float().flatten(0, 1), prev.flatten())
    return sum(storages.values())


@pytest.mark.parametrize("residual", ["post_ln", "pre_ln"])
@pytest.mark.parametrize(("d", "ffn", "heads", "length"), [(64, 256, 4, 16), (128, 512, 8, 32)])
def test_per_layer_activations_bound_what_autograd_saves(
    d: int, ffn: int, heads: int, length: int, residual: str
) -> None:
    tokens = SENTENCES * length
    one = _saved_bytes(_model(1, 1, d, ffn, heads, residual), length)
    shape = Shape(1, 1, d, ffn, heads, VOCAB)
    for enc, dec, decoder in ((2, 1, False), (1, 2, True)):
        measured = (_saved_bytes(_model(enc, dec, d, ffn, heads, residual), length) - one) / tokens
        estimated = saved_values_per_token(shape, length, decoder=decoder) * 4  # fp32 here
        # an upper bound, and a close one
        assert measured <= estimated <= 1.15 * measured, (decoder, measured, estimated)


def test_parameter_count_equals_the_built_model() -> None:
    for enc, dec, d, ffn, heads in ((1, 1, 64, 256, 4), (3, 2, 96, 384, 4)):
        shape = Shape(enc, dec, d, ffn, heads, VOCAB)
        built = sum(p.numel() for p in _model(enc, dec, d, ffn, heads).parameters())
        assert parameter_count(shape) == built


def test_checkpointing_and_16_bit_shrink_the_activation_term() -> None:
    deep = Shape(60, 12, 512, 2048, 8, 40000)
    plain = estimate_training_memory(deep, 3584, bytes_per_value=4)
    half = estimate_training_memory(deep, 3584, bytes_per_value=2)
    checkpointed = estimate_training_memory(deep, 3584, bytes_per_value=2, checkpointing=True)
    assert half.activations_gb == pytest.approx(plain.activations_gb / 2)
    assert checkpointed.activations_gb < half.activations_gb / 10
    assert (
        plain.static_gb == half.static_gb == checkpointed.static_gb == pytest.approx(plain.params * 16 / 1e9)
    )
