"""The Admin paper's Table 1 hybrid: a Post-LN encoder under a Pre-LN decoder (``decoder_residual``).

Oracles outside the hybrid's own code path: its encoder computes what a plain Post-LN model's encoder
computes with the same weights, and its decoder what a plain Pre-LN model's decoder computes on that
encoder output; a decoder_residual equal to the encoder's builds the plain model, draw for draw."""

from __future__ import annotations

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_model
from pipeline_lib.cli import main
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.residual import PostLNConnection, PreLNConnection
from pipeline_lib.model.transformer import build_model
from pipeline_lib.train.run_identity import run_identity


def config(residual: str, decoder_residual: str = "") -> ModelConfig:
    return ModelConfig(30, 30, encoder_layers=3, decoder_layers=2, d_model=16, ffn_dim=32, heads=2,
                       residual=residual, decoder_residual=decoder_residual, dropout=0.0)  # fmt: skip


def test_each_stack_has_its_own_layout():
    model = build_model(config("post_ln", "pre_ln"))
    assert {type(c) for c in model.encoder.connections()} == {PostLNConnection}
    assert {type(c) for c in model.decoder.connections()} == {PreLNConnection}
    assert model.encoder.final_norm is None and model.decoder.final_norm is not None


def test_the_hybrid_computes_what_the_two_plain_models_compute():
    torch.manual_seed(0)
    hybrid = build_model(config("post_ln", "pre_ln")).eval()
    post, pre = build_model(config("post_ln")).eval(), build_model(config("pre_ln")).eval()
    weights = hybrid.state_dict()
    post.load_state_dict({k: v for k, v in weights.items() if not k.startswith("decoder.")}, strict=False)
    pre.load_state_dict({k: v for k, v in weights.items() if not k.startswith("encoder.")}, strict=False)
    src = torch.randint(4, 30, (2, 7))
    prev = torch.randint(4, 30, (2, 5))
    with torch.no_grad():
        enc = hybrid.encode(src)
        torch.testing.assert_close(enc.hidden, post.encode(src).hidden, rtol=0, atol=0)
        torch.testing.assert_close(hybrid.decode(prev, enc), pre.decode(prev, enc), rtol=0, atol=0)


def test_naming_the_encoders_own_layout_builds_the_plain_model():
    torch.manual_seed(3)
    same = build_model(config("pre_ln", "pre_ln")).state_dict()
    torch.manual_seed(3)
    plain = build_model(config("pre_ln")).state_dict()
    assert same.keys() == plain.keys() and all(torch.equal(same[k], plain[k]) for k in same)


@pytest.mark.parametrize("residual", ["admin", "deepnorm", "dlcl"])
def test_only_the_plain_layouts_mix(residual: str):
    with pytest.raises(ConfigError, match="decoder_residual=pre_ln needs a post_ln or pre_ln encoder"):
        config(residual, "pre_ln")


def test_runs_from_before_the_field_keep_their_identity(tmp_path):
    train = {"data": str(tmp_path), "lr": 1e-3, "max_tokens": 100}
    model = config("post_ln").to_dict()
    before = {k: v for k, v in model.items() if k != "decoder_residual"}  # a run started before the field
    assert run_identity(train, model)["id"] == run_identity(train, before)["id"]
    hybrid = config("post_ln", "pre_ln").to_dict()
    assert run_identity(train, hybrid)["id"] != run_identity(train, model)["id"]


def test_train_builds_and_trains_the_hybrid_from_its_flag(tmp_path):
    bin_dir = make_bin_dir(tmp_path)
    save = tmp_path / "run"
    assert main(train_args(bin_dir, save, "--residual", "post_ln", "--decoder-residual", "pre_ln",
                           "--max-update", "30", "--seed", "1")) == 0  # fmt: skip
    losses = [r["loss"] for r in read_log(save)]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5  # it learns
    model, _ = load_model(save / "checkpoint_last.pt")
    assert model.config.decoder_residual == "pre_ln"
    assert {type(c) for c in model.decoder.connections()} == {PreLNConnection}


def test_the_export_refuses_a_hybrid_by_name():
    from pipeline_lib.export.plain import plain_transformer

    with pytest.raises(ConfigError, match="decoder_residual=pre_ln cannot be exported"):
        plain_transformer(build_model(config("post_ln", "pre_ln")))
