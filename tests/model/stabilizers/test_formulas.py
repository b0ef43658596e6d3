"""The stabilizers beyond post-LN/pre-LN/Admin/DLCL: each one's constants against its paper's formula
(values computed by hand), its init against the plain model it rescales, its equations on real layers,
and DeepNorm's folding into post-LN."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.fold import fold_to_post_ln
from pipeline_lib.model.stabilizers.deepnorm import deepnorm_constants
from pipeline_lib.model.stabilizers.ds_init import ds_init_gain
from pipeline_lib.model.stabilizers.sub_ln import sub_ln_gain
from pipeline_lib.model.stabilizers.t_fixup import t_fixup_gain

# (N, M) -> values worked out from each paper's formula (python3 -c, 6 decimals):
# DeepNorm enc α = 0.81(N⁴M)^(1/16), β = 0.87(N⁴M)^(-1/16); dec α = (3M)^(1/4), β = (12M)^(-1/4)
# Sub-LN enc γ = sqrt(ln(3M) ln(2N) / 3), dec γ = sqrt(ln(3M)); T-Fixup enc 0.67 N^(-1/4), dec (9M)^(-1/4);
# DeepNorm's torchscale encoder β = 1.15 (N⁴M)^(-1/16) (deepnorm_beta: torchscale)
HAND = {
    (6, 6): dict(dn=(1.417938, 0.496989, 2.059767, 0.343295), subln=(1.547288, 1.700109), tfix=(0.428092, 0.368894)),
    (18, 18): dict(dn=(1.998746, 0.352571, 2.710806, 0.260847), subln=(2.182857, 1.997244), tfix=(0.325279, 0.280299)),
    (50, 50): dict(dn=(2.750509, 0.256207, 3.499636, 0.202052), subln=(2.773375, 2.238445), tfix=(0.25196, 0.217119)),
    (12, 6): dict(dn=(1.686222, 0.417916, 2.059767, 0.343295), subln=(1.749834, 1.700109), tfix=(0.359981, 0.368894)),
    (100, 100): dict(dn=(3.415742, 0.20631, 4.161791, 0.169904), subln=(3.173875, 2.388259), tfix=(0.211873, 0.182574)),
}  # fmt: skip
TORCHSCALE_BETA = {
    (6, 6): 0.65694,
    (18, 18): 0.466042,
    (50, 50): 0.338665,
    (12, 6): 0.552418,
    (100, 100): 0.272708,
}


@pytest.mark.parametrize("depths", sorted(HAND))
def test_constants_equal_the_papers_formulas_worked_by_hand(depths: tuple[int, int]) -> None:
    n, m = depths
    hand = HAND[depths]
    assert deepnorm_constants("encoder", n, m) + deepnorm_constants("decoder", n, m) == pytest.approx(
        hand["dn"], abs=1e-6
    )
    assert (sub_ln_gain("encoder", n, m), sub_ln_gain("decoder", n, m)) == pytest.approx(
        hand["subln"], abs=1e-6
    )
    assert (t_fixup_gain("encoder", n, m), t_fixup_gain("decoder", n, m)) == pytest.approx(
        hand["tfix"], abs=1e-6
    )
    alpha, beta = deepnorm_constants("encoder", n, m, "torchscale")
    assert (alpha, beta) == pytest.approx((hand["dn"][0], TORCHSCALE_BETA[depths]), abs=1e-6)
    assert deepnorm_constants("decoder", n, m, "torchscale") == deepnorm_constants("decoder", n, m)


def test_ds_init_gain_is_the_layer_number_to_the_minus_quarter_or_half() -> None:
    """code: Xavier's bound × l^(-1/4) (bzhangGo/zero's variance scale l^(-1/2)); paper: × l^(-1/2)."""
    layers = (1, 4, 9, 16, 81)
    assert [ds_init_gain(layer, "code") for layer in layers] == pytest.approx(
        [1.0, 0.707107, 0.57735, 0.5, 1 / 3]
    )
    assert [ds_init_gain(layer, "paper") for layer in layers] == pytest.approx([1.0, 0.5, 1 / 3, 0.25, 1 / 9])


def config(residual: str, n: int = 3, m: int = 2, **kw) -> ModelConfig:
    fields = dict(src_vocab_size=40, tgt_vocab_size=40, encoder_layers=n, decoder_layers=m,
                  d_model=16, ffn_dim=32, heads=2, residual=residual)  # fmt: skip
    return ModelConfig(**{**fields, **kw})


def seeded(cfg: ModelConfig):
    torch.manual_seed(0)
    return build_model(cfg)


def pieces(model) -> dict[str, torch.Tensor]:
    """Every weight an init may scale, by role: q/k and v rows of the fused projections apart."""
    d = model.config.d_model
    out: dict[str, torch.Tensor] = {"embed": model.encoder.embed.table.weight}
    for stack in ("encoder", "decoder"):
        for i, layer in enumerate(getattr(model, stack).layers):
            at = f"{stack}.{i}"
            out[f"{at}.self.qk"] = layer.self_attn.qkv_proj.weight[: 2 * d]
            out[f"{at}.self.v"] = layer.self_attn.qkv_proj.weight[2 * d :]
            out[f"{at}.self.out"] = layer.self_attn.out_proj.weight
            if stack == "decoder":
                out[f"{at}.cross.q"] = layer.cross_attn.q_proj.weight
                out[f"{at}.cross.k"] = layer.cross_attn.kv_proj.weight[:d]
                out[f"{at}.cross.v"] = layer.cross_attn.kv_proj.weight[d:]
                out[f"{at}.cross.out"] = layer.cross_attn.out_proj.weight
            out[f"{at}.fc1"] = layer.ffn.fc1.weight
            out[f"{at}.fc2"] = layer.ffn.fc2.weight
    return out


def expected_gain(method: str, name: str, n: int, m: int) -> float:
    stack, layer, role = name.split(".", 2) if name != "embed" else ("", "", "embed")
    scaled = role.endswith((".v", ".out")) or role in ("fc1", "fc2")
    if method == "deepnorm":
        return deepnorm_constants(stack, n, m)[1] if scaled else 1.0
    if method == "sub_ln":  # torchscale skips the decoder's cross-attention
        return sub_ln_gain(stack, n, m) if scaled and not role.startswith("cross") else 1.0
    if method == "t_fixup":  # v at Xavier gain 1; the shared table takes the source factor (9N)^(-1/4)
        if role == "embed":
            return (9 * n) ** -0.25
        return t_fixup_gain(stack, n, m) * (2**0.5 if role.endswith(".v") else 1.0) if scaled else 1.0
    if method == "ds_init":
        return 1.0 if role == "embed" else ds_init_gain(int(layer) + 1)
    if method == "b2t":
        return 1.0 if role == "embed" else {"encoder": n, "decoder": m}[stack] ** -0.5
    raise AssertionError(method)


@pytest.mark.parametrize("method,base", [("deepnorm", "post_ln"), ("sub_ln", "pre_ln"), ("t_fixup", "post_ln"),
                                         ("ds_init", "post_ln"), ("b2t", "post_ln")])  # fmt: skip
def test_init_rescales_exactly_the_weights_the_paper_names(method: str, base: str) -> None:
    n, m = 4, 3
    # on the shared fairseq base (stabilizer_init: fairseq), each method is that base times its factor
    scaled = pieces(seeded(config(method, n, m, stabilizer_init="fairseq")))
    plain = pieces(seeded(config(base, n, m)))
    for name, weight in plain.items():
        gain = expected_gain(method, name, n, m)
        torch.testing.assert_close(scaled[name], weight * gain, rtol=1e-6, atol=0, msg=f"{method} {name}")


def test_rezero_and_t_fixup_have_no_layer_norm_and_rezero_starts_as_identity() -> None:
    for method in ("rezero", "t_fixup"):
        model = build_model(config(method))
        assert not any(isinstance(m, nn.LayerNorm) for m in model.modules()), method
    model = build_model(config("rezero")).eval()
    alphas = {id(c.alpha): c.alpha for s in (model.encoder, model.decoder) for c in s.connections()}
    assert len(alphas) == 3 + 2 and all(a.item() == 0.0 and a.requires_grad for a in alphas.values())
    src = torch.randint(4, 40, (2, 5))
    embedded = model.encoder.embed(src)
    torch.testing.assert_close(model.encode(src).hidden, embedded)  # every layer is the identity at α = 0


def test_rezero_and_t_fixup_connections_add_the_branch_without_a_norm() -> None:
    x = torch.randn(2, 3, 16)
    model = build_model(config("rezero")).eval()
    layer = model.encoder.layers[0]
    layer.ffn_residual.alpha.data.fill_(0.25)  # the layer's one α: its attention sub-layer uses it too
    for conn, f in layer.sublayers():
        torch.testing.assert_close(conn(x, f), x + 0.25 * f(x))
    assert model.encoder.layers[1].ffn_residual.alpha.item() == 0.0  # another layer's α
    model = build_model(config("t_fixup")).eval()
    conn, f = model.encoder.layers[1].ffn_residual, model.encoder.layers[1].ffn
    torch.testing.assert_close(conn(x, f), x + f(x))


def test_deepnorm_scales_the_shortcut_by_each_stacks_alpha() -> None:
    model = build_model(config("deepnorm", 4, 3)).eval()
    x = torch.randn(2, 3, 16)
    for stack in ("encoder", "decoder"):
        alpha, _ = deepnorm_constants(stack, 4, 3)
        layer = getattr(model, stack).layers[-1]
        conn, f = layer.ffn_residual, layer.ffn
        torch.testing.assert_close(conn(x, f), conn.norm(alpha * x + f(x)))


def test_sub_ln_normalizes_inside_both_branches_before_the_output_projection() -> None:
    model = build_model(config("sub_ln")).eval()
    ffn = model.encoder.layers[0].ffn
    x = torch.randn(2, 3, 16)
    torch.testing.assert_close(ffn(x), ffn.fc2(ffn.inner_norm(F.relu(ffn.fc1(x)))))
    attn = model.encoder.layers[0].self_attn
    assert attn.inner_norm is not None and attn.inner_norm.normalized_shape == (16,)
    captured = {}
    attn.out_proj.register_forward_hook(lambda m, i, o: captured.setdefault("input", i[0]))
    attn(x)
    mean, var = captured["input"].mean(-1), captured["input"].var(-1, correction=0)
    torch.testing.assert_close(mean, torch.zeros_like(mean), atol=1e-5, rtol=0)  # γ=1, β=0 at init
    torch.testing.assert_close(var, torch.ones_like(var), atol=1e-3, rtol=0)


def test_b2t_adds_each_layers_input_before_its_last_layer_norm_only() -> None:
    model = build_model(config("b2t")).eval()
    x = torch.randn(2, 5, 16)
    for layer in model.encoder.layers:
        h = layer.self_attn_residual.norm(x + layer.self_attn(x))
        expected = layer.ffn_residual.norm(h + layer.ffn(h) + x)
        got, _ = layer((x, torch.zeros_like(x)), None)  # the side stream in is ignored: the layer sets it
        torch.testing.assert_close(got, expected)
        x = got
    memory = torch.randn(2, 4, 16)
    layer = model.decoder.layers[0]
    h1 = layer.self_attn_residual.norm(x + layer.self_attn(x, causal=True))
    h2 = layer.cross_attn_residual.norm(h1 + layer.cross_attn(h1, key_value=memory))
    expected = layer.ffn_residual.norm(h2 + layer.ffn(h2) + x)
    torch.testing.assert_close(layer((x, x), memory, None)[0], expected)


def test_resi_dual_adds_the_normalized_sum_of_every_branch_to_the_post_ln_output() -> None:
    model = build_model(config("resi_dual")).eval()
    src = torch.randint(4, 40, (2, 5))
    x = model.encoder.embed(src)
    post, dual = x, x
    for layer in model.encoder.layers:
        for conn, branch in layer.sublayers():
            update = branch(post)
            post, dual = conn.norm(post + update), dual + update
    expected = post + model.encoder.combiner.norm(dual)
    torch.testing.assert_close(model.encode(src).hidden, expected)
    # the final LN's eps is the authors' (microsoft/ResiDual@8682f75 resi_dual/resi_dual.py:24,157)
    assert model.encoder.combiner.norm.eps == model.decoder.combiner.norm.eps == 1e-7


def train_a_little(model, steps: int = 5) -> None:
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        src, tgt = torch.randint(4, 40, (6, 7), generator=g), torch.randint(4, 40, (6, 6), generator=g)
        optimizer.zero_grad()
        F.cross_entropy(model(src, tgt).flatten(0, 1), tgt.flatten()).backward()
        optimizer.step()


def test_a_trained_deepnorm_model_folds_into_post_ln_with_the_same_outputs() -> None:
    torch.manual_seed(0)
    model = build_model(config("deepnorm", 6, 4))
    train_a_little(model)  # LN gains and weights move away from their initial values
    model = model.double().eval()
    folded = fold_to_post_ln(model).double().eval()
    assert folded.config.residual == "post_ln"
    assert folded.encoder.embed.input_gain[0].item() == pytest.approx(deepnorm_constants("encoder", 6, 4)[0])
    src, prev = torch.randint(4, 40, (3, 9)), torch.randint(4, 40, (3, 7))
    src[1, 6:] = 0
    with torch.no_grad():
        diff = (model(src, prev) - folded(src, prev)).abs().max().item()
    plain = build_model(config("post_ln", 6, 4)).double().eval()
    plain.load_state_dict(model.state_dict())  # the same weights without α differ: folding is not trivial
    with torch.no_grad():
        unfolded = (model(src, prev) - plain(src, prev)).abs().max().item()
    print(f"max |deepnorm - folded| = {diff:.2e}; without folding {unfolded:.2e}")
    assert diff <= 1e-6 < 1e-2 < unfolded


@pytest.mark.parametrize("method", ["rezero", "t_fixup", "b2t", "resi_dual", "sub_ln", "ds_init"])
def test_methods_without_a_scaled_shortcut_refuse_to_fold(method: str) -> None:
    with pytest.raises(ValueError, match="no scaled shortcut"):
        fold_to_post_ln(build_model(config(method)))
