"""Mutation gaps of layers (docs/mutation.md): one fast test per surviving mutant, each with an oracle
independent of the code under test: the papers' layer equations written out from the sub-modules
(post-LN: x <- LN(x + f(x)) per sub-layer; the FFN fc2(relu(fc1 x))), the sites counted by hand."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.layers import DecoderLayerCache, FeedForward, site
from pipeline_lib.model.residual import Site
from pipeline_lib.model.transformer import build_model

D, FFN = 8, 16


def config(**kw) -> ModelConfig:
    fields = dict(src_vocab_size=20, tgt_vocab_size=20, encoder_layers=3, decoder_layers=2, d_model=D,
                  ffn_dim=FFN, heads=2, dropout=0.0)  # fmt: skip
    return ModelConfig(**{**fields, **kw})


def layers(**kw):
    torch.manual_seed(0)
    return build_model(config(**kw)).double().eval()


def test_the_ffn_is_fc2_of_relu_of_fc1() -> None:
    torch.manual_seed(0)
    ffn = FeedForward(D, FFN, activation_dropout=0.0).double()
    x = torch.randn(2, 3, D, dtype=torch.float64)
    expected = F.relu(x @ ffn.fc1.weight.T + ffn.fc1.bias) @ ffn.fc2.weight.T + ffn.fc2.bias
    torch.testing.assert_close(ffn(x), expected)
    assert ffn.input_projections() == [ffn.fc1] and ffn.inner_norm is None
    w1, w2 = ffn.fc1.weight.detach().clone(), ffn.fc2.weight.detach().clone()
    ffn.scale_residual_weights(0.25)
    torch.testing.assert_close(ffn.fc1.weight.detach(), w1 * 0.25)
    torch.testing.assert_close(ffn.fc2.weight.detach(), w2 * 0.25)


def test_the_sub_ln_ffn_normalizes_the_hidden_activations() -> None:
    torch.manual_seed(0)
    ffn = FeedForward(D, FFN, activation_dropout=0.0, inner_norm=True).double()
    with torch.no_grad():
        ffn.inner_norm.weight.normal_()
    x = torch.randn(4, D, dtype=torch.float64)
    hidden = ffn.inner_norm(F.relu(x @ ffn.fc1.weight.T + ffn.fc1.bias))
    torch.testing.assert_close(ffn(x), hidden @ ffn.fc2.weight.T + ffn.fc2.bias)
    assert ffn.inner_norm.normalized_shape == (FFN,)


def test_activation_dropout_drops_in_training_only() -> None:
    ffn = FeedForward(D, FFN, activation_dropout=0.5)
    x = torch.randn(3, D)
    assert ffn.activation_dropout.p == 0.5
    ffn.eval()
    expected = F.relu(x @ ffn.fc1.weight.T + ffn.fc1.bias) @ ffn.fc2.weight.T + ffn.fc2.bias
    torch.testing.assert_close(ffn(x), expected)
    ffn.train()
    torch.manual_seed(0)
    assert not torch.allclose(ffn(x), expected)


@pytest.mark.parametrize(
    "stack, layer, sublayer, expected",
    [
        ("encoder", 2, 1, Site(D, 0.3, "encoder", 2, 3, 2, 1, 2)),
        ("decoder", 1, 2, Site(D, 0.3, "decoder", 1, 3, 2, 2, 3)),
        ("decoder", 0, 0, Site(D, 0.3, "decoder", 0, 3, 2, 0, 3)),
    ],
)
def test_a_site_knows_its_stack_layer_and_place(
    stack: str, layer: int, sublayer: int, expected: Site
) -> None:
    got = site(config(dropout=0.3), stack, layer, sublayer)
    assert got == expected
    assert got.last_in_layer == (sublayer == (1 if stack == "encoder" else 2))


def test_each_layers_connections_sit_where_they_are() -> None:
    model = layers()
    for stack, count in (("encoder", 2), ("decoder", 3)):
        for index, layer in enumerate(getattr(model, stack).layers):
            sites = [connection.site for connection, _ in layer.sublayers()]
            assert [(s.stack, s.layer, s.sublayer, s.sublayers) for s in sites] == [
                (stack, index, i, count) for i in range(count)
            ]


def test_the_dropouts_reach_their_modules() -> None:
    model = build_model(config(attention_dropout=0.2, activation_dropout=0.3))
    enc, dec = model.encoder.layers[0], model.decoder.layers[0]
    assert enc.self_attn.dropout == dec.self_attn.dropout == dec.cross_attn.dropout == 0.2
    assert enc.ffn.activation_dropout.p == dec.ffn.activation_dropout.p == 0.3
    assert enc.self_attn.heads == dec.cross_attn.heads == 2 and enc.ffn.fc1.out_features == FFN


def test_a_post_ln_encoder_layer_by_its_equations() -> None:
    layer = layers().encoder.layers[0]
    x = torch.randn(2, 5, D, dtype=torch.float64)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        h = layer.self_attn_residual.norm(x + layer.self_attn(x, key_padding_mask=pad))
        expected = layer.ffn_residual.norm(h + layer.ffn(h))
        torch.testing.assert_close(layer(x, pad), expected)


def test_a_post_ln_decoder_layer_by_its_equations_and_step_by_step() -> None:
    layer = layers().decoder.layers[0]
    x = torch.randn(2, 4, D, dtype=torch.float64)
    memory = torch.randn(2, 5, D, dtype=torch.float64)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    with torch.no_grad():
        h1 = layer.self_attn_residual.norm(x + layer.self_attn(x, causal=True))
        h2 = layer.cross_attn_residual.norm(h1 + layer.cross_attn(h1, key_value=memory, key_padding_mask=pad))
        expected = layer.ffn_residual.norm(h2 + layer.ffn(h2))
        torch.testing.assert_close(layer(x, memory, pad), expected)
        cache = DecoderLayerCache()
        steps = [layer(x[:, t : t + 1], memory, pad, cache) for t in range(4)]
        torch.testing.assert_close(torch.cat(steps, dim=1), expected)
        beams = DecoderLayerCache(group=3)  # three beams per sentence share its encoder rows
        got = layer(x.repeat_interleave(3, dim=0), memory, pad, beams)
        torch.testing.assert_close(got, expected.repeat_interleave(3, dim=0))


def test_sub_ln_puts_inner_norms_in_self_attention_and_ffn_not_cross_attention() -> None:
    model = build_model(config(residual="sub_ln"))
    for layer in (*model.encoder.layers, *model.decoder.layers):
        assert layer.self_attn.inner_norm is not None and layer.ffn.inner_norm is not None
    assert all(layer.cross_attn.inner_norm is None for layer in model.decoder.layers)
    plain = build_model(config())
    assert all(
        layer.ffn.inner_norm is None and layer.self_attn.inner_norm is None for layer in plain.encoder.layers
    )


def test_the_layer_index_reaches_depth_aware_connections() -> None:
    """DS-Init scales layer l's weights by l^(-1/4) (its 'code' variant): each layer's own index."""
    plain, scaled = layers(), layers(residual="ds_init")
    for index, (a, b) in enumerate(zip(plain.encoder.layers, scaled.encoder.layers, strict=True), start=1):
        ratio = (b.ffn.fc2.weight / a.ffn.fc2.weight).mean().item()
        assert ratio == pytest.approx(index**-0.25, rel=1e-6)
