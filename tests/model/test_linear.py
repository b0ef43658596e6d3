"""Linear layers on oneDNN (pipeline_lib/model/linear.py) compute what F.linear computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.cpu import onednn as linear_module
from pipeline_lib.cpu.onednn import onednn_available, onednn_linear, resolve_cpu_gemm, set_cpu_gemm
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.linear import Linear
from pipeline_lib.model.transformer import build_model
from pipeline_lib.train.config import TrainConfig

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="torch built without oneDNN")


def _values_and_grads(fn, x, weight, bias, grad_out):
    x, weight = x.clone().requires_grad_(), weight.clone().requires_grad_()
    bias = bias.clone().requires_grad_() if bias is not None else None
    out = fn(x, weight, bias)
    # the incoming gradient arrives as a transposed view, as it does behind a head split
    out.backward(grad_out.transpose(0, 1).contiguous().transpose(0, 1))
    return out.detach(), x.grad, weight.grad, None if bias is None else bias.grad


@needs_onednn
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("leading", [(7, 13), (91,)])
def test_onednn_linear_matches_f_linear_values_and_gradients(
    with_bias: bool, leading: tuple[int, ...]
) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(*leading, 24, generator=gen)
    weight = torch.randn(40, 24, generator=gen)
    bias = torch.randn(40, generator=gen) if with_bias else None
    grad_out = torch.randn(*leading, 40, generator=gen)
    want = _values_and_grads(F.linear, x, weight, bias, grad_out)
    got = _values_and_grads(onednn_linear, x, weight, bias, grad_out)
    for name, a, b in zip(("out", "d x", "d weight", "d bias"), got, want, strict=True):
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape and a.dtype == torch.float32, name
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)


@needs_onednn
def test_set_cpu_gemm_routes_the_models_linear_layers(monkeypatch) -> None:
    calls = []
    real = linear_module.onednn_matmul
    monkeypatch.setattr(linear_module, "onednn_matmul", lambda *a: calls.append(1) or real(*a))
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, encoder_layers=2, decoder_layers=2,
                         d_model=16, ffn_dim=32, heads=2)  # fmt: skip
    model = build_model(config).eval()
    src = torch.randint(4, 30, (3, 5))
    prev = torch.randint(4, 30, (3, 6))
    linears = [m for m in model.modules() if isinstance(m, Linear)]
    # encoder: qkv, out, fc1, fc2; decoder: qkv, out, cross q, kv, out, fc1, fc2; output layer
    assert len(linears) == 2 * 4 + 2 * 7 + 1
    with torch.no_grad():
        default = model(src, prev)
        assert calls == []
        set_cpu_gemm(model, "onednn")
        routed = model(src, prev)
        assert len(calls) == len(linears)
        set_cpu_gemm(model, "mkl")
        model(src, prev)
        assert len(calls) == len(linears)
    torch.testing.assert_close(routed, default, rtol=1e-5, atol=1e-5)


def _graph_nodes(root) -> list[str]:
    seen, stack, names = set(), [root], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


@pytest.mark.parametrize("gemm", ["mkl", pytest.param("onednn", marks=needs_onednn)])
def test_training_graph_has_no_in_place_view_copies(gemm: str) -> None:
    """No CopySlices node: an in-place op on a view (the FFN's ReLU on a reshaped linear output)
    would make backward zero-fill, clone and copy back that whole tensor in every layer."""
    config = ModelConfig(src_vocab_size=30, tgt_vocab_size=30, encoder_layers=2, decoder_layers=2,
                         d_model=16, ffn_dim=32, heads=2)  # fmt: skip
    model = build_model(config).train()
    set_cpu_gemm(model, gemm)
    src = torch.randint(4, 30, (3, 5))
    prev = torch.randint(4, 30, (3, 6))
    nodes = _graph_nodes(model(src, prev).sum().grad_fn)
    assert "ThresholdBackward1" in nodes or "ReluBackward0" in nodes  # the ReLU is in the graph
    assert "CopySlices" not in nodes


def test_cpu_gemm_choices_are_checked() -> None:
    assert resolve_cpu_gemm("mkl", 512, 4096) == "mkl"
    # auto: oneDNN only where it was measured faster (AVX-512, d >= 256, >= 2,048-token batches)
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    assert resolve_cpu_gemm("auto", 256, 2048) == ("onednn" if avx512 and onednn_available() else "mkl")
    assert resolve_cpu_gemm("auto", 128, 4096) == "mkl"
    assert resolve_cpu_gemm("auto", 512, 1024) == "mkl"
    with pytest.raises(ConfigError, match="openblas"):
        resolve_cpu_gemm("openblas", 256, 2048)
    base = dict(data="d", source_lang="en", target_lang="fr", save_dir="s", max_update=1)
    with pytest.raises(ConfigError, match=r"train\.cpu_gemm \(--cpu-gemm\)='onedn'"):
        TrainConfig(**base, cpu_gemm="onedn")
    with pytest.raises(ConfigError, match="fp32 training"):
        TrainConfig(**base, cpu_gemm="onednn", amp="bf16")
