"""``--compile``: regional torch.compile of the layers gives eager's loss and gradients, traces one graph
per layer kind whatever the depth, and trains through the CLI to eager's losses."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.cli import main
from pipeline_lib.model import ModelConfig, build_model
from pipeline_lib.model.compile import compile_layers
from pipeline_lib.model.registry import residual_names


def model_config(residual: str, encoder_layers: int = 3) -> ModelConfig:
    return ModelConfig(40, 40, encoder_layers=encoder_layers, decoder_layers=2, d_model=16, ffn_dim=32,
                       heads=2, residual=residual, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip


def loss_and_gradients(model: torch.nn.Module) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(5)
    src, prev = torch.randint(4, 40, (4, 7), generator=g), torch.randint(4, 40, (4, 6), generator=g)
    src[1, 5:] = 0  # padding in the source: the masks go through the compiled graph too
    loss = F.cross_entropy(model(src, prev).flatten(0, 1), prev.flatten())
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("residual", residual_names())
def test_compiled_layers_give_eager_loss_and_gradients(residual: str) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = build_model(model_config(residual)).train()
    compiled = build_model(model_config(residual)).train()
    compiled.load_state_dict(eager.state_dict())
    # checkpointing wraps the compiled layer: both together, on the variants whose streams differ most
    checkpointing = residual in ("admin", "resi_dual")
    eager.set_activation_checkpointing(checkpointing)
    compiled.set_activation_checkpointing(checkpointing)
    assert compile_layers(compiled, backend="aot_eager") == 5  # dynamo's graphs and AOT autograd's backward
    loss, grads = loss_and_gradients(eager)
    loss_c, grads_c = loss_and_gradients(compiled)
    torch.testing.assert_close(loss_c, loss, rtol=1e-6, atol=0)
    assert grads_c.keys() == grads.keys() and len(grads) > 20
    for name, grad in grads.items():
        torch.testing.assert_close(grads_c[name], grad, rtol=1e-5, atol=1e-7, msg=name)
    assert not counters["graph_break"], dict(counters["graph_break"])


def unique_graphs(encoder_layers: int) -> int:
    torch._dynamo.reset()
    counters.clear()
    model = build_model(model_config("admin", encoder_layers)).train()
    compile_layers(model, backend="eager")
    loss_and_gradients(model)
    return counters["stats"]["unique_graphs"]


def test_one_graph_per_layer_kind_whatever_the_depth() -> None:
    assert unique_graphs(2) == unique_graphs(8) == 2  # an encoder layer and a decoder layer


def test_train_cli_with_compile_follows_the_eager_losses(tmp_path: Path) -> None:
    """The real inductor path: generated kernels for forward and backward, through the trainer."""
    torch._dynamo.reset()
    counters.clear()
    bin_dir = make_bin_dir(tmp_path / "data", n_train=48)
    runs = {}
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        argv = train_args(bin_dir, tmp_path / name, "--max-update", "6", "--optimizer", "adam", "--dropout", "0", "--pad-to-multiple", "8",
                          "--attention-dropout", "0", "--activation-dropout", "0", *extra)  # fmt: skip
        assert main(argv) == 0
        runs[name] = [r["loss"] for r in read_log(tmp_path / name)]
    assert len(runs["eager"]) == 6
    # the eager CPU run scores its output in token chunks, the compiled one whole: rounding differs
    assert runs["compiled"] == pytest.approx(runs["eager"], rel=1e-4)
    assert runs["compiled"][-1] < runs["compiled"][0]  # adam: TC's RAdam moves nothing in 5 updates
    assert counters["stats"]["unique_graphs"] >= 2  # it did compile: dynamo traced the layers
    eager_state = torch.load(tmp_path / "eager" / "checkpoint_last.pt", weights_only=False)["model"]
    compiled_state = torch.load(tmp_path / "compiled" / "checkpoint_last.pt", weights_only=False)["model"]
    assert compiled_state.keys() == eager_state.keys()  # in-place compile: no _orig_mod prefixes


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--cpu-workers", "2"], "drop --cpu-workers"), (["--cpu-gemm", "onednn"], "drop --cpu-gemm onednn")],
)
def test_compile_refuses_what_it_replaces(tmp_path: Path, capsys, flags: list[str], message: str) -> None:
    bin_dir = make_bin_dir(tmp_path / "data", n_train=8)
    assert main(train_args(bin_dir, tmp_path / "x", "--max-update", "1", "--compile", *flags)) == 2
    assert message in capsys.readouterr().err


def test_cuda_graph_mode_is_inductor_only_and_checked_at_the_boundary() -> None:
    """--compile-mode reduce-overhead: refused without --compile, on a CPU, or without bounded shapes
    (tests/train/test_cuda.py::test_cuda_graphs_follow_eager checks it against eager on a GPU)."""
    from pipeline_lib.errors import ConfigError
    from pipeline_lib.train.config import TrainConfig

    model = build_model(model_config("post_ln"))
    with pytest.raises(ValueError, match="inductor only"):
        compile_layers(model, backend="aot_eager", mode="reduce-overhead")
    base = dict(data="d", source_lang="xx", target_lang="yy", save_dir="s", max_update=1)
    with pytest.raises(ConfigError, match="needs --compile"):
        TrainConfig(**base, compile_mode="reduce-overhead")
    with pytest.raises(ConfigError, match="--device cuda and --pad-to-multiple 8"):
        TrainConfig(**base, compile=True, compile_mode="reduce-overhead", device="cpu", pad_to_multiple=8)
    with pytest.raises(ConfigError, match="--device cuda and --pad-to-multiple 8"):
        TrainConfig(**base, compile=True, compile_mode="reduce-overhead", device="cuda")
    TrainConfig(**base, compile=True, compile_mode="reduce-overhead", device="cuda", pad_to_multiple=8)
