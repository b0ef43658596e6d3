"""Admin profiling, profile files, the closed form, and folding into post-LN."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.errors import CheckpointError
from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.admin import (
    AdminProfile,
    apply_profile,
    closed_form_omega,
    closed_form_profile,
    fold_admin,
    omegas_from_variances,
    profile_model,
)


def admin_config(**kw) -> ModelConfig:
    fields = dict(src_vocab_size=50, tgt_vocab_size=50, encoder_layers=4, decoder_layers=3,
                  d_model=32, ffn_dim=64, heads=4, residual="admin")  # fmt: skip
    fields.update(kw)
    return ModelConfig(**fields)


def sample_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 50, (8, 9), generator=g)
    tgt = torch.randint(4, 50, (8, 7), generator=g)
    prev = torch.cat([torch.ones(8, 1, dtype=torch.long), tgt[:, :-1]], dim=1)
    return src, prev, tgt


def loss_of(model, batch) -> torch.Tensor:
    src, prev, tgt = batch
    return F.cross_entropy(model(src, prev).flatten(0, 1), tgt.flatten())


def profiled(seed: int = 0, recursion: str = "reference") -> tuple[torch.nn.Module, AdminProfile]:
    torch.manual_seed(seed)
    model = build_model(admin_config())
    batch = sample_batch(seed)
    return model, profile_model(model, lambda m: loss_of(m, batch), {"sentences": 8}, recursion)


@pytest.mark.parametrize("recursion", ["reference", "cumulative"])
def test_profile_starts_at_one_and_is_non_decreasing(recursion: str) -> None:
    model, profile = profiled(recursion=recursion)
    assert profile.recursion == recursion
    for stack, count in (("encoder", 8), ("decoder", 9)):
        omegas = profile.omegas[stack]
        assert len(omegas) == count and len(profile.variances[stack]) == count
        assert omegas[0] == 1.0
        assert all(b >= a for a, b in itertools.pairwise(omegas))
        assert omegas[-1] > 1.0
        if recursion == "cumulative":
            assert omegas == omegas_from_variances(profile.variances[stack])
    # profiling leaves the model untouched: no update, no gradients, all ω back at 1
    assert all(p.grad is None for p in model.parameters())
    assert all(
        torch.all(c.omega == 1) for stack in (model.encoder, model.decoder) for c in stack.connections()
    )


def test_reference_recursion_is_measured_on_the_stream_that_flows() -> None:
    """ω_{i+1}² = Var[x_i·ω_i] + Var[f_i] (numpy's population variance, as the reference code), read
    off an independent forward pass of the same batch and dropout draws with the profiled ω applied."""
    seed = 2
    model, profile = profiled(seed)
    apply_profile(model, profile)
    seen: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"encoder": [], "decoder": []}
    handles = []
    for name in seen:
        for connection in getattr(model, name).connections():
            inputs: list[np.ndarray] = []
            handles.append(
                connection.register_forward_pre_hook(
                    lambda m, i, box=inputs: box.append(i[0].detach().numpy())
                )
            )
            handles.append(
                connection.branch_output.register_forward_hook(
                    lambda m, i, out, box=inputs, name=name: seen[name].append(
                        (box.pop(), out.detach().numpy())
                    )
                )
            )
    torch.manual_seed(seed)  # profiled() drew the model from the seed, then the dropout masks
    build_model(admin_config())
    model.train()
    loss_of(model, sample_batch(seed))
    for handle in handles:
        handle.remove()
    for name, streams in seen.items():
        omegas = profile.omegas[name]
        for i, (x, f) in enumerate(streams[:-1]):
            total = np.var(x.astype(np.float64) * omegas[i]) + np.var(f.astype(np.float64))
            assert omegas[i + 1] == pytest.approx(math.sqrt(total), rel=1e-5), (name, i)
        # the first residual is the embedding output, not an LN output: its variance is not 1, which
        # is where the reference recursion and the cumulative one part
        assert np.var(streams[0][0]) > 1.1
        assert profile.residual_variances[name][0] == pytest.approx(np.var(streams[0][0]), rel=1e-4)
    cumulative = profiled(seed, "cumulative")[1]
    assert profile.omegas["encoder"][1] != pytest.approx(cumulative.omegas["encoder"][1], rel=1e-3)


def test_profiling_is_reproducible_from_the_seed() -> None:
    assert profiled(3)[1].omegas == profiled(3)[1].omegas
    assert profiled(3)[1].omegas != profiled(4)[1].omegas


def test_omegas_follow_the_running_total() -> None:
    assert omegas_from_variances([3.0, 5.0, 7.0]) == [1.0, 2.0, 3.0]


def test_profile_file_round_trip_and_mismatch(tmp_path: Path) -> None:
    model, profile = profiled()
    path = tmp_path / "exp" / "admin_profile.json"
    profile.save(path)
    loaded = AdminProfile.load(path)
    apply_profile(model, loaded)
    first_ffn = model.encoder.layers[0].ffn_residual.omega
    assert torch.allclose(first_ffn, torch.full_like(first_ffn, loaded.omegas["encoder"][1]))

    deeper = build_model(admin_config(encoder_layers=6))
    with pytest.raises(CheckpointError, match="encoder_layers=4 but the model has encoder_layers=6"):
        apply_profile(deeper, loaded)

    loaded.omegas["decoder"] = loaded.omegas["decoder"][:-1]
    with pytest.raises(CheckpointError, match="8 decoder ω values, the model has 9 sub-layers"):
        apply_profile(model, loaded)


def test_missing_and_corrupt_profile_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        AdminProfile.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"omegas": ')
    with pytest.raises(CheckpointError, match="not valid JSON"):
        AdminProfile.load(bad)


def test_profile_requires_admin_model() -> None:
    model = build_model(admin_config(residual="post_ln"))
    with pytest.raises(ValueError, match="residual='admin'"):
        profile_model(model, lambda m: loss_of(m, sample_batch()), {})


def test_closed_form() -> None:
    assert closed_form_omega(12) == pytest.approx(math.sqrt(13 / math.log(13) - 1))
    profile = closed_form_profile(admin_config())
    assert profile.omegas["encoder"] == [closed_form_omega(8)] * 8
    assert profile.omegas["decoder"] == [closed_form_omega(9)] * 9


def test_omegas_travel_in_the_state_dict() -> None:
    model, profile = profiled()
    apply_profile(model, profile)
    restored = build_model(admin_config())
    restored.load_state_dict(model.state_dict())
    last = restored.decoder.layers[-1].ffn_residual.omega
    assert torch.allclose(last, torch.full_like(last, profile.omegas["decoder"][-1]))


def test_folding_a_trained_admin_model_preserves_outputs() -> None:
    model, profile = profiled()
    apply_profile(model, profile)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    for step in range(5):  # train so that ω, LN and weights move away from their initial values
        optimizer.zero_grad()
        loss_of(model, sample_batch(step)).backward()
        optimizer.step()
    omega = model.encoder.layers[0].self_attn_residual.omega
    assert (omega - 1.0).abs().max() > 1e-2  # even the first sub-layer's ω has moved

    model.eval()
    folded = fold_admin(model).eval()
    assert folded.config.residual == "post_ln"
    assert not any(name.endswith("omega") for name, _ in folded.named_parameters())
    src, prev, _ = sample_batch(9)
    src[2, 5:] = 0
    with torch.no_grad():
        diff = (model(src, prev) - folded(src, prev)).abs().max().item()
    print(f"max |admin - folded| = {diff:.2e}")
    assert diff <= 1e-5


@pytest.mark.parametrize("sublayers", [2, 12, 18, 120, 36])
def test_closed_form_equals_the_admin_authors_package(sublayers: int) -> None:
    import admin_torch  # a dev dependency: pyproject.toml

    assert closed_form_omega(sublayers) == pytest.approx(admin_torch.calculate_init(sublayers), rel=1e-12)


def test_padding_tokens_embed_to_zero_as_in_fairseq_and_profiling_sees_it() -> None:
    """fairseq zeroes the sinusoidal row it gives padding tokens (LiyuanLucasLiu/Transformer-Clinic@70f72b7
    fairseq/fairseq/modules/sinusoidal_positional_embedding.py:51-52) as well as the token row, so a
    padding token embeds to zero, and the reference's first Var[x·ω] (transformer_layer.py:193, over
    the whole tensor, padding included) averages those zeros in."""
    torch.manual_seed(0)
    model = build_model(admin_config(dropout=0.0))
    src, prev, tgt = sample_batch(3)
    src[0, 4:] = 0  # pad_idx 0
    src[5, 2:] = 0
    pad = src.eq(0)
    with torch.no_grad():
        embedded = model.encoder.embed(src)
    assert torch.count_nonzero(embedded[pad]) == 0
    columns = torch.arange(src.shape[1]).expand_as(src)
    expected = model.encoder.embed.table.weight[src] * math.sqrt(32) + model.encoder.embed.positions[columns]
    torch.testing.assert_close(embedded[~pad], expected[~pad])  # real tokens as before
    profile = profile_model(model, lambda m: loss_of(m, (src, prev, tgt)), {"sentences": 8})
    whole = np.var(embedded.numpy().reshape(-1))  # numpy's population variance, zeros included
    assert profile.residual_variances["encoder"][0] == pytest.approx(float(whole), rel=1e-5)
