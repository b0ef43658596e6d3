"""Each stabilizer's initial weights against its authors' code, at 6L-6L and 12L-6L.

The oracle is the formula, computed here: fairseq's base init (Xavier-uniform bound
gain·sqrt(6 / (fan_in + fan_out)), q/k/v at gain 1/sqrt(2), out/FFN at gain 1, embeddings
N(0, d^-1/2)) times the method's factor as the authors' file:line writes it. No constant function
of the project is called. A uniform U(-b, b) matrix of 4,096 draws has max |w| within 1.5% of b
(P(below) ~ e^-62) and a standard deviation of b/sqrt(3) within ~0.7% (one SE), so each weight
matrix is checked on both: the bound to 1.5%, the standard deviation to 4%.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from torch import nn

from pipeline_lib.model import ModelConfig, build_model

D, FFN, HEADS, VOCAB = 64, 256, 4, 400
DEPTHS = [(6, 6), (12, 6)]
# Every method's init is the base one unless listed; ReZero's and Admin's own parameters (α, ω) are
# not weight matrices, and pre-LN/DLCL/ResiDual add only LayerNorms.
BASE_METHODS = ["post_ln", "pre_ln", "admin", "dlcl", "rezero", "resi_dual"]


def xavier_bound(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    return gain * math.sqrt(6.0 / (fan_in + fan_out))


# fairseq MultiheadAttention.reset_parameters: q, k, v each xavier_uniform gain 1/sqrt(2) (equal sizes),
# out_proj gain 1 (layer6ai-labs/T-Fixup@b17e166 fairseq/modules/multihead_attention.py:85-97); fc1/fc2
# fairseq's Linear, xavier_uniform gain 1 (fairseq/models/transformer.py:915-920).
BASE_BOUND = {
    "q": xavier_bound(D, D, 2**-0.5),
    "k": xavier_bound(D, D, 2**-0.5),
    "v": xavier_bound(D, D, 2**-0.5),
    "out": xavier_bound(D, D),
    "fc1": xavier_bound(D, FFN),
    "fc2": xavier_bound(FFN, D),
}
# fairseq Embedding: normal(0, d^-0.5) (fairseq/models/transformer.py:908-912)
BASE_EMBED_STD = D**-0.5

# (stack, 0-based layer, sub-layer "self"/"cross"/"ffn", role) -> factor on the base init
Factor = Callable[[str, int, str, str], float]


def config(residual: str, n: int, m: int, **kw) -> ModelConfig:
    fields = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, encoder_layers=n, decoder_layers=m,
                  d_model=D, ffn_dim=FFN, heads=HEADS, residual=residual)  # fmt: skip
    return ModelConfig(**{**fields, **kw})


def weight_groups(model) -> list[tuple[str, int, str, str, torch.Tensor]]:
    """(stack, layer, sub-layer, role, weight) for every d × d projection and FFN matrix."""
    out = []
    for stack in ("encoder", "decoder"):
        for i, layer in enumerate(getattr(model, stack).layers):
            q, k, v = layer.self_attn.qkv_proj.weight.detach().chunk(3)
            out += [(stack, i, "self", "q", q), (stack, i, "self", "k", k), (stack, i, "self", "v", v)]
            out.append((stack, i, "self", "out", layer.self_attn.out_proj.weight.detach()))
            if stack == "decoder":
                ck, cv = layer.cross_attn.kv_proj.weight.detach().chunk(2)
                out += [(stack, i, "cross", "q", layer.cross_attn.q_proj.weight.detach()),
                        (stack, i, "cross", "k", ck), (stack, i, "cross", "v", cv),
                        (stack, i, "cross", "out", layer.cross_attn.out_proj.weight.detach())]  # fmt: skip
            out.append((stack, i, "ffn", "fc1", layer.ffn.fc1.weight.detach()))
            out.append((stack, i, "ffn", "fc2", layer.ffn.fc2.weight.detach()))
    return out


def check_weights(model, factor: Factor) -> None:
    for stack, layer, sub, role, weight in weight_groups(model):
        bound = BASE_BOUND[role] * factor(stack, layer, sub, role)
        where = f"{stack}.{layer}.{sub}.{role}: expected bound {bound:.5f}"
        peak = weight.abs().max().item()
        assert 0.985 * bound <= peak <= bound * (1 + 1e-5), f"{where}, max |w| {peak:.5f}"
        std = weight.std(correction=0).item()
        assert std == pytest.approx(bound / math.sqrt(3.0), rel=0.04), f"{where}, std {std:.5f}"


def check_embeddings(model, src_factor: float, tgt_factor: float) -> None:
    for stack, factor in (("encoder", src_factor), ("decoder", tgt_factor)):
        table = getattr(model, stack).embed.table.weight.detach()
        assert torch.count_nonzero(table[model.config.pad_idx]) == 0
        std = table[1:].std(correction=0).item()
        assert std == pytest.approx(BASE_EMBED_STD * factor, rel=0.03), f"{stack} embeddings"


def built(residual: str, n: int, m: int, **kw):
    torch.manual_seed(0)
    return build_model(config(residual, n, m, **kw))


def one(*args) -> float:
    return 1.0


@pytest.mark.parametrize("depths", DEPTHS)
@pytest.mark.parametrize("method", BASE_METHODS)
def test_base_init_is_fairseqs_per_projection_xavier(method: str, depths: tuple[int, int]) -> None:
    """Cross-attention q and the fused k/v included: each d × d projection at gain 1/sqrt(2)."""
    model = built(method, *depths)
    check_weights(model, one)
    check_embeddings(model, 1.0, 1.0)


@pytest.mark.parametrize("depths", DEPTHS)
@pytest.mark.parametrize("beta", ["paper", "torchscale"])
def test_deepnorm_init_on_the_fairseq_base(depths: tuple[int, int], beta: str) -> None:
    """stabilizer_init fairseq: v/out/fc1/fc2 × β, self- and cross-attention; q, k, embeddings untouched. Encoder β: paper
    0.87·(N⁴M)^(-1/16) (LiyuanLucasLiu/Transformer-Clinic@70f72b7 fairseq/fairseq/modules/transformer_layer.py:114);
    torchscale divides by (N⁴M)^(1/16) / 1.15 (microsoft/torchscale@4d1e0e8
    torchscale/architecture/encoder.py:237-252). Decoder β = (12M)^(-1/4), cross-attention
    included (torchscale/architecture/decoder.py:286-298)."""
    n, m = depths
    model = built("deepnorm", n, m, deepnorm_beta=beta, stabilizer_init="fairseq")
    encoder_beta = 0.87 * (n**4 * m) ** (-1 / 16) if beta == "paper" else 1.0 / ((n**4 * m) ** 0.0625 / 1.15)
    betas = {"encoder": encoder_beta, "decoder": math.pow(12.0 * m, 0.25) ** -1}

    def factor(stack: str, layer: int, sub: str, role: str) -> float:
        return betas[stack] if role in ("v", "out", "fc1", "fc2") else 1.0

    check_weights(model, factor)
    check_embeddings(model, 1.0, 1.0)


@pytest.mark.parametrize("depths", DEPTHS)
def test_sub_ln_init(depths: tuple[int, int]) -> None:
    """v/out/fc1/fc2 × γ, γ_enc = sqrt(ln(3M)·ln(2N)/3) (microsoft/torchscale@4d1e0e8
    torchscale/architecture/encoder.py:254-270), γ_dec = sqrt(ln 3M) (decoder.py:300-314), the
    decoder's cross-attention skipped (`if "encoder_attn" in name: continue`, decoder.py:306-307)."""
    n, m = depths
    model = built("sub_ln", n, m)
    gammas = {
        "encoder": math.sqrt(math.log(3 * m) * math.log(2 * n) / 3),
        "decoder": math.sqrt(math.log(m * 3)),
    }

    def factor(stack: str, layer: int, sub: str, role: str) -> float:
        scaled = role in ("v", "out", "fc1", "fc2") and sub != "cross"
        return gammas[stack] if scaled else 1.0

    check_weights(model, factor)
    check_embeddings(model, 1.0, 1.0)


@pytest.mark.parametrize("depths", DEPTHS)
@pytest.mark.parametrize("shared", [True, False])
def test_t_fixup_init(depths: tuple[int, int], shared: bool) -> None:
    """layer6ai-labs/T-Fixup@b17e166 fairseq/modules/transformer_layer.py:36-44 (encoder: fc1, fc2,
    out × 0.67 N^(-1/4); v × 0.67 N^(-1/4) × 2**0.5) and :161-170 (decoder, self and cross:
    × (9M)^(-1/4), v × 2**0.5 more); embeddings fairseq/models/transformer.py:378-381 (source ×
    (9N)^(-1/4)) and 604-607 (target × (9M)^(-1/4) only when not share_all_embeddings)."""
    n, m = depths
    model = built("t_fixup", n, m, share_all_embeddings=shared)
    gains = {"encoder": 0.67 * n ** (-1.0 / 4.0), "decoder": (9 * m) ** (-1.0 / 4.0)}

    def factor(stack: str, layer: int, sub: str, role: str) -> float:
        if role == "v":
            return gains[stack] * 2**0.5
        return gains[stack] if role in ("out", "fc1", "fc2") else 1.0

    check_weights(model, factor)
    source = (9 * n) ** (-1 / 4)
    check_embeddings(model, source, source if shared else (9 * m) ** (-1 / 4))


@pytest.mark.parametrize("depths", DEPTHS)
def test_b2t_init_on_the_fairseq_base(depths: tuple[int, int]) -> None:
    """stabilizer_init fairseq: every non-LayerNorm weight of every layer × N_stack^(-1/2): rescaling_init(self,
    args.encoder_layers / args.decoder_layers), `scaling = layer_num ** -0.5` on every parameter with
    "weight" and without "layer_norm" in its name (takase/b2t_connection@c8e2ad4
    fairseq/modules/transformer_layer.py:55-57, 215-217, 401-405)."""
    n, m = depths
    model = built("b2t", n, m, stabilizer_init="fairseq")
    layers = {"encoder": n, "decoder": m}
    check_weights(model, lambda stack, layer, sub, role: layers[stack] ** -0.5)
    check_embeddings(model, 1.0, 1.0)


@pytest.mark.parametrize("depths", DEPTHS)
@pytest.mark.parametrize("variant", ["code", "paper"])
def test_ds_init_init_on_the_fairseq_base(depths: tuple[int, int], variant: str) -> None:
    """stabilizer_init fairseq: layer l (1-based, per stack), every matrix. code: tf.variance_scaling_initializer(1.0 ·
    (layer + 1) ** -0.5, mode="fan_avg", distribution="uniform") (bzhangGo/zero@d97e2c2
    models/transformer.py:38-42, 124-128), whose bound is sqrt(3 · scale / fan_avg); paper: Xavier's
    bound / sqrt(l) (docs/depth_scale_init_and_merged_attention/dsinit.png)."""
    model = built("ds_init", *depths, ds_init_variant=variant, stabilizer_init="fairseq")

    def factor(stack: str, layer: int, sub: str, role: str) -> float:
        l = layer + 1  # noqa: E741 - the paper's symbol
        if variant == "paper":
            return 1.0 / math.sqrt(l)
        # tf's bound sqrt(3·scale / fan_avg) over Xavier's sqrt(6 / (fan_in + fan_out)) on one matrix
        fan_in, fan_out = {"fc1": (D, FFN), "fc2": (FFN, D)}.get(role, (D, D))
        fan_avg = (fan_in + fan_out) / 2.0
        scale = 1.0 * (layer + 1) ** -0.5
        return math.sqrt(3.0 * scale / fan_avg) / xavier_bound(fan_in, fan_out)

    check_weights(model, factor)
    check_embeddings(model, 1.0, 1.0)


def check_normal(model, std_of: Callable[[str, int, str, str], float]) -> None:
    """xavier_normal draws: the standard deviation to 4%, and tails no uniform law has (a uniform's
    max |w| is √3 σ; 4,096 normal draws reach ~3.5 σ)."""
    for stack, layer, sub, role, weight in weight_groups(model):
        std = std_of(stack, layer, sub, role)
        where = f"{stack}.{layer}.{sub}.{role}: expected normal std {std:.5f}"
        assert weight.std(correction=0).item() == pytest.approx(std, rel=0.04), where
        assert weight.abs().max().item() > 2.5 * std, f"{where}, not normal-tailed"


def xavier_std(fan_in: int, fan_out: int, gain: float) -> float:
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


FANS = {"fc1": (D, FFN), "fc2": (FFN, D)}


@pytest.mark.parametrize("depths", DEPTHS)
def test_deepnorm_init_as_transformer_clinic(depths: tuple[int, int]) -> None:
    """The default (stabilizer_init authors): xavier_normal at gain β for v, out, fc1, fc2 and gain 1
    for q, k, self- and cross-attention (LiyuanLucasLiu/Transformer-Clinic@70f72b7
    fairseq/fairseq/modules/transformer_layer.py:114-121 encoder, 469-480 decoder); biases 0."""
    n, m = depths
    model = built("deepnorm", n, m)
    betas = {"encoder": 0.87 * (n**4 * m) ** (-1 / 16), "decoder": (12.0 * m) ** -0.25}

    def std_of(stack: str, layer: int, sub: str, role: str) -> float:
        gain = betas[stack] if role in ("v", "out", "fc1", "fc2") else 1.0
        return xavier_std(*FANS.get(role, (D, D)), gain)

    check_normal(model, std_of)
    check_embeddings(model, 1.0, 1.0)
    assert all(b.abs().max() == 0 for name, b in model.named_parameters() if name.endswith("proj.bias"))


@pytest.mark.parametrize("depths", DEPTHS)
def test_b2t_init_as_its_authors_fairseq(depths: tuple[int, int]) -> None:
    """The default: fc1/fc2 are plain nn.Linear (takase/b2t_connection@c8e2ad4
    fairseq/modules/transformer_layer.py:59-63, 219-223): U(±1/√fan_in) weight and bias; the attention's
    q/k/v biases nn.Linear's U(±1/√d) (multihead_attention.py:58-62, 85-99 draw only weights); then
    every weight × N_stack^(-1/2) (:401-405)."""
    n, m = depths
    model = built("b2t", n, m)
    layers = {"encoder": n, "decoder": m}

    def factor(stack: str, layer: int, sub: str, role: str) -> float:
        base = 1.0 / math.sqrt(FANS[role][0]) / BASE_BOUND[role] if role in FANS else 1.0
        return base * layers[stack] ** -0.5

    check_weights(model, factor)
    check_embeddings(model, 1.0, 1.0)
    for name, bias in model.named_parameters():
        if name.endswith(("qkv_proj.bias", "q_proj.bias", "kv_proj.bias", "fc1.bias", "fc2.bias")):
            bound = 1.0 / math.sqrt(FFN if name.endswith("fc2.bias") else D)
            assert 0.8 * bound < bias.abs().max().item() <= bound, name  # biases are not rescaled
        elif name.endswith("out_proj.bias"):
            assert bias.abs().max().item() == 0, name


@pytest.mark.parametrize("depths", DEPTHS)
def test_ds_init_init_as_zero(depths: tuple[int, int]) -> None:
    """The default: as the fairseq-base test, but cross-attention's q, k and v are zero's separate
    d × d maps (bzhangGo/zero@d97e2c2 func.py:207,211-212) at Xavier gain 1, not 1/√2."""
    model = built("ds_init", *depths)

    def factor(stack: str, layer: int, sub: str, role: str) -> float:
        fan_in, fan_out = FANS.get(role, (D, D))
        code = math.sqrt(3.0 * (layer + 1) ** -0.5 / ((fan_in + fan_out) / 2.0)) / xavier_bound(
            fan_in, fan_out
        )
        return code * (2**0.5 if sub == "cross" and role in ("q", "k", "v") else 1.0)

    check_weights(model, factor)
    check_embeddings(model, 1.0, 1.0)


def test_ds_init_variants_part_by_the_papers_example() -> None:
    """The sheet's worked case: at l = 18 the paper's factor is 0.236, the code's 0.486."""
    model_code, model_paper = (built("ds_init", 18, 1, ds_init_variant=v) for v in ("code", "paper"))
    plain = built("post_ln", 18, 1)
    last = plain.encoder.layers[17].ffn.fc1.weight
    assert (model_code.encoder.layers[17].ffn.fc1.weight / last).mean().item() == pytest.approx(
        0.486, abs=1e-3
    )
    assert (model_paper.encoder.layers[17].ffn.fc1.weight / last).mean().item() == pytest.approx(
        0.236, abs=1e-3
    )


# ----------------------------------------------------- the 4L-3L check run
def small(residual: str, **kw) -> nn.Module:
    torch.manual_seed(0)
    fields = dict(src_vocab_size=40, tgt_vocab_size=40, encoder_layers=4, decoder_layers=3,
                  d_model=16, ffn_dim=32, heads=2, residual=residual)  # fmt: skip
    return build_model(ModelConfig(**{**fields, **kw}))


def test_rezero_has_one_scalar_alpha_per_layer() -> None:
    """One resweight per layer, used by its 2 (encoder) or 3 (decoder) sub-layers
    (majumderb/rezero@e2c94a8 rezero/transformer/rztx.py:47,74,80; :115,139,142,148)."""
    model = small("rezero")
    alphas = [p for name, p in model.named_parameters() if name.endswith(".alpha")]
    assert len(alphas) == 4 + 3 and all(a.numel() == 1 and a.item() == 0.0 for a in alphas)
    for stack in (model.encoder, model.decoder):
        for layer in stack.layers:
            owners = {id(conn.alpha) for conn, _ in layer.sublayers()}
            assert len(owners) == 1


def test_sub_ln_has_two_more_layer_norms_per_layer_than_pre_ln() -> None:
    """Inner LNs in self-attention and the FFN only; cross-attention has none (microsoft/torchscale@4d1e0e8
    torchscale/component/multihead_attention.py:49-53, feedforward_network.py:123)."""

    def norms(model: nn.Module) -> int:
        return sum(isinstance(module, nn.LayerNorm) for module in model.modules())

    assert norms(small("sub_ln")) - norms(small("pre_ln")) == 2 * (4 + 3)
    assert all(layer.cross_attn.inner_norm is None for layer in small("sub_ln").decoder.layers)


def test_b2t_layer_weights_are_post_lns_times_the_stack_depth_to_the_minus_half() -> None:
    b2t, post = small("b2t", stabilizer_init="fairseq"), small("post_ln")
    b2t_params, post_params = dict(b2t.named_parameters()), dict(post.named_parameters())
    assert b2t_params.keys() == post_params.keys()
    for name, weight in post_params.items():
        stack, _, rest = name.partition(".")
        in_layer_matrix = rest.startswith("layers.") and name.endswith(".weight") and weight.dim() == 2
        gain = {"encoder": 4**-0.5, "decoder": 3**-0.5}[stack] if in_layer_matrix else 1.0
        torch.testing.assert_close(b2t_params[name], weight * gain, rtol=1e-7, atol=0, msg=name)
