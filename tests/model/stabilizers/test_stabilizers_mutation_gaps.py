"""Mutation gaps of the stabilizers (docs/mutation.md): one fast test per surviving mutant, each with an
oracle independent of the code under test."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline_lib.model import build_model
from pipeline_lib.model.fold import fold_to_post_ln
from tests.model.stabilizers.test_formulas import config, train_a_little
from tests.model.stabilizers.test_init_vs_authors import D, built

# Which stabilizers end their stacks with a LayerNorm, by each paper's equations: the post-LN family
# normalizes inside every sub-layer (or, for ReZero and T-Fixup, nowhere); Sub-LN is pre-LN's layout.
FINAL_LAYER_NORM = {
    "deepnorm": False,
    "b2t": False,
    "ds_init": False,
    "t_fixup": False,
    "rezero": False,
    "resi_dual": False,  # its final LN is the un-normalized stream's, inside the combiner
    "sub_ln": True,
}


@pytest.mark.parametrize("method", sorted(FINAL_LAYER_NORM))
def test_only_pre_ln_layouts_end_the_stack_with_a_layer_norm(method: str) -> None:
    model = build_model(config(method))
    for stack in (model.encoder, model.decoder):
        assert (stack.final_norm is not None) == FINAL_LAYER_NORM[method], method


def test_a_float64_deepnorm_model_folds_exactly() -> None:
    """In float64 the fold is exact to rounding: α enters at the model's own precision, not float32's
    (α rounded to float32 is off by ~1e-8 relative, which moves the outputs by ~1e-7)."""
    torch.manual_seed(0)
    model = build_model(config("deepnorm", 6, 4)).double()
    train_a_little(model)
    model.eval()
    folded = fold_to_post_ln(model).eval()
    src, prev = torch.randint(4, 40, (3, 9)), torch.randint(4, 40, (3, 7))
    with torch.no_grad():
        assert (model(src, prev) - folded(src, prev)).abs().max().item() < 1e-12


@pytest.mark.parametrize("depths", [(6, 6)])
def test_b2t_draws_every_block_of_a_fused_attention_bias(depths: tuple[int, int]) -> None:
    """B2T's authors' attention biases are nn.Linear's U(±1/√d) for q, k and v alike: each d-sized
    block of a fused bias is drawn (none left at fairseq's 0), none beyond the bound."""
    model = built("b2t", *depths)
    bound = 1.0 / math.sqrt(D)
    for name, bias in model.named_parameters():
        if name.endswith(("qkv_proj.bias", "kv_proj.bias")):
            blocks = bias.detach().view(-1, D)
            assert blocks.shape[0] == (3 if name.endswith("qkv_proj.bias") else 2), name
            for block in blocks:
                assert 0.8 * bound < block.abs().max().item() <= bound, name


def test_b2t_biases_are_drawn_from_the_whole_symmetric_interval() -> None:
    """U(-1/√fan_in, +1/√fan_in): negative and positive draws alike, not one end of the interval."""
    model = built("b2t", 6, 6)
    for name, bias in model.named_parameters():
        if name.endswith(("qkv_proj.bias", "kv_proj.bias", "q_proj.bias", "fc1.bias", "fc2.bias")):
            for block in bias.detach().view(-1, D) if "proj" in name else [bias.detach()]:
                assert block.min().item() < 0 < block.max().item(), name
