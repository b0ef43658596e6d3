"""Each residual variant against its equation, on hand-sized tensors."""

from __future__ import annotations

import torch

from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.registry import residual_spec
from pipeline_lib.model.residual import (
    AdminConnection,
    DynamicLinearCombination,
    PostLNConnection,
    PreLNConnection,
    Site,
    TwoStreamCombiner,
)


def site(d_model: int = 4) -> Site:
    return Site(d_model, 0.0, "encoder", 0, 6, 6)


def residual_variant(name: str, dlcl_norm: str = "pre"):
    return residual_spec(name).build(
        ModelConfig(8, 8, d_model=4, heads=1, residual=name, dlcl_norm=dlcl_norm)
    )


def layer_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


X = torch.tensor([[1.0, 2.0, 3.0, 6.0], [0.5, -1.0, 2.0, 0.0]])
W = torch.tensor([[0.0, 1.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 3.0]])


def branch(h: torch.Tensor) -> torch.Tensor:
    return h @ W.T


def test_post_ln_is_ln_of_sum() -> None:
    conn = PostLNConnection(site()).eval()
    torch.testing.assert_close(conn(X, branch), layer_norm(X + branch(X)))


def test_pre_ln_normalises_the_branch_input_only() -> None:
    conn = PreLNConnection(site()).eval()
    torch.testing.assert_close(conn(X, branch), X + branch(layer_norm(X)))


def test_admin_scales_the_shortcut_by_omega() -> None:
    conn = AdminConnection(site()).eval()
    omega = torch.tensor([1.5, 2.0, 0.5, 3.0])
    conn.omega.data.copy_(omega)
    torch.testing.assert_close(conn(X, branch), layer_norm(X * omega + branch(X)))
    assert conn.omega.requires_grad  # ω is trained


def test_dlcl_pre_norm_combines_normalised_history_with_avg_weights() -> None:
    combiner = DynamicLinearCombination(num_layers=2, d_model=4, norm="pre").eval()
    y0, y1, y2 = X, X * 2 + 1, X - 3
    state = combiner.start(y0)
    torch.testing.assert_close(combiner.next_input(state), layer_norm(y0))
    combiner.add(state, y1)
    torch.testing.assert_close(combiner.next_input(state), (layer_norm(y0) + layer_norm(y1)) / 2)
    combiner.add(state, y2)
    expected = (layer_norm(y0) + layer_norm(y1) + layer_norm(y2)) / 3
    torch.testing.assert_close(combiner.output(state), expected)


def test_dlcl_post_norm_normalises_the_weighted_sum() -> None:
    combiner = DynamicLinearCombination(num_layers=2, d_model=4, norm="post").eval()
    combiner.weight.data[2] = torch.tensor([0.2, 0.3, 0.5])
    y0, y1, y2 = X, X * 2 + 1, X - 3
    state = combiner.start(y0)
    combiner.add(state, y1)
    torch.testing.assert_close(combiner.next_input(state), layer_norm((y0 + y1) / 2))
    combiner.add(state, y2)
    torch.testing.assert_close(combiner.output(state), layer_norm(0.2 * y0 + 0.3 * y1 + 0.5 * y2))


def test_dlcl_weights_stay_lower_triangular_under_training() -> None:
    combiner = DynamicLinearCombination(num_layers=3, d_model=4, norm="pre")
    state = combiner.start(X)
    for k in range(3):
        combiner.next_input(state)
        combiner.add(state, X + k)
    combiner.output(state).sum().backward()
    grad = combiner.weight.grad
    assert torch.equal(grad.triu(1), torch.zeros_like(grad))  # no gradient reaches the unused upper part
    assert grad.tril().abs().sum() > 0


def test_variant_table() -> None:
    assert residual_variant("pre_ln").final_norm and not residual_variant("post_ln").final_norm
    assert residual_variant("dlcl", "pre").connection is PreLNConnection
    assert residual_variant("dlcl", "post").connection is PostLNConnection
    assert residual_variant("admin").connection is AdminConnection


# -- In-process checks of what the equations above leave open (make mutate MODULE=residual) ---------


def test_two_streams_start_at_the_embedding_and_the_stack_outputs_the_main_one() -> None:
    combiner = TwoStreamCombiner()
    state = combiner.start(X)
    assert len(state) == 1 and state[0][0] is X and state[0][1] is X
    combiner.add(state, (X + 1, X - 1))  # a layer's (main, side) output replaces its input
    torch.testing.assert_close(combiner.next_input(state), (X + 1, X - 1))
    torch.testing.assert_close(combiner.output(state), X + 1)


def test_dlcl_combines_a_bfloat16_history_in_bfloat16() -> None:
    """Autocast layers hand back low-precision outputs while the weights stay fp32."""
    combiner = DynamicLinearCombination(num_layers=2, d_model=4, norm="post").eval()
    y0, y1 = X, X * 2 + 1
    state = combiner.start(y0.bfloat16())
    combiner.add(state, y1.bfloat16())
    out = combiner.next_input(state)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), layer_norm((y0 + y1) / 2), atol=3e-2, rtol=0)


def test_dlcl_mask_is_not_saved_in_checkpoints() -> None:
    combiner = DynamicLinearCombination(num_layers=2, d_model=4, norm="pre")
    norms = {f"norms.{k}.{p}" for k in range(3) for p in ("weight", "bias")}
    assert set(combiner.state_dict()) == {"weight", *norms}


def test_dlcl_variants_build_their_own_combiner_and_final_norm() -> None:
    pre, post = residual_variant("dlcl", "pre"), residual_variant("dlcl", "post")
    assert pre.final_norm and not post.final_norm  # pre-norm ends with an LN; post is normed already
    for variant, pre_norm in ((pre, True), (post, False)):
        combiner = variant.make_combiner(2, 4)
        assert isinstance(combiner, DynamicLinearCombination) and combiner.pre_norm is pre_norm
        assert len(combiner.norms) == 3


def test_a_connection_keeps_its_site() -> None:
    """Depth-aware connections read it (B2T: the first sub-layer and the last in its layer)."""
    where = Site(4, 0.0, "decoder", 2, 6, 6, sublayer=2, sublayers=3)
    for cls in (PostLNConnection, PreLNConnection, AdminConnection):
        assert cls(where).site == where
    assert where.last_in_layer and not Site(4, 0.0, "decoder", 2, 6, 6, sublayer=1, sublayers=3).last_in_layer
