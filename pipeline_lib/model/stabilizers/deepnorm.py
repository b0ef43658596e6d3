"""DeepNorm (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers").

x = LN(α·x + f(x)) at every sub-layer, and at init the value and output projections of attention
(self and cross) and both FFN projections are multiplied by β (queries, keys, embeddings and the
output projection keep theirs). Encoder-decoder constants for N encoder and M decoder layers:

    encoder  α = 0.81·(N⁴M)^(1/16)   β = 0.87·(N⁴M)^(-1/16) (paper) or 1.15·(N⁴M)^(-1/16) (torchscale)
    decoder  α = (3M)^(1/4)          β = (12M)^(-1/4)

microsoft/torchscale@4d1e0e8: torchscale/architecture/encoder.py:78-85 (encoder α), 235-252 (encoder
β: weights divided by (N⁴M)^(1/16) / 1.15); decoder.py:89-91 (decoder α), 286-298 (decoder β, which
also scales cross-attention). The paper's 0.87 is also Transformer-Clinic's
(LiyuanLucasLiu/Transformer-Clinic@70f72b7 fairseq/fairseq/modules/transformer_layer.py:109-121).
``ModelConfig.deepnorm_beta`` picks the encoder β; the default is the paper's: 0.87 ≈ 1/1.15, so
torchscale's division by (N⁴M)^(1/16)/1.15 reads as the paper's constant on the wrong side of the
fraction rather than a different method, and the paper's value is the one its derivation gives.

Base init (``ModelConfig.stabilizer_init``): ``authors`` (default) draws as Transformer-Clinic's
DeepNorm and the paper's pseudo-code do (transformer_layer.py:114-121 encoder, 469-480 decoder):
v, out, fc1 and fc2 from xavier_normal at gain β, q and k from xavier_normal at gain 1 (separate d × d
projections there; each d × d block of a fused one here), self- and cross-attention; biases 0.
``fairseq``: fairseq's base init (Xavier-uniform, q/k/v at gain 1/√2) with v, out, fc1, fc2 × β,
as torchscale scales its own base.

α is a constant, so a trained DeepNorm model folds into plain post-LN like Admin
(``pipeline_lib.model.fold``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.residual import STACKS, Branch, PostLNConnection, ResidualVariant, Site
from pipeline_lib.model.stabilizers.redraw import attention_blocks
from pipeline_lib.model.stabilizers.scaling import scale_branch_weights

ENCODER_BETA = {"paper": 0.87, "torchscale": 1.15}  # ModelConfig.deepnorm_beta -> the constant


def deepnorm_constants(
    stack: str, encoder_layers: int, decoder_layers: int, beta: str = "paper"
) -> tuple[float, float]:
    """(α, β) of one stack of an N-M encoder-decoder; ``beta`` picks the encoder β's constant."""
    n, m = encoder_layers, decoder_layers
    if stack == "encoder":
        depth = n**4 * m
        return 0.81 * depth ** (1 / 16), ENCODER_BETA[beta] * depth ** (-1 / 16)
    return (3 * m) ** (1 / 4), (12 * m) ** (-1 / 4)


class DeepNormConnection(PostLNConnection):
    def __init__(self, site: Site) -> None:
        super().__init__(site)
        self.alpha, _ = deepnorm_constants(site.stack, site.encoder_layers, site.decoder_layers)

    def forward(self, x: Tensor, f: Branch) -> Tensor:
        return self.norm(x * self.alpha + self.branch(f, x))

    def shortcut_scale(self) -> Tensor:
        return torch.tensor(self.alpha, dtype=self.norm.weight.dtype, device=self.norm.weight.device)


def _draw_as_transformer_clinic(stack: nn.Module, beta: float) -> None:
    with torch.no_grad():
        for layer in stack.layers:
            for _, branch in layer.sublayers():
                if isinstance(branch, MultiheadAttention):
                    blocks = attention_blocks(branch)
                    nn.init.xavier_normal_(blocks["q"][0], gain=1.0)
                    nn.init.xavier_normal_(blocks["k"][0], gain=1.0)
                    nn.init.xavier_normal_(blocks["v"][0], gain=beta)
                    nn.init.xavier_normal_(branch.out_proj.weight, gain=beta)
                else:
                    nn.init.xavier_normal_(branch.fc1.weight, gain=beta)
                    nn.init.xavier_normal_(branch.fc2.weight, gain=beta)


def init(model: nn.Module, config: Any) -> None:
    for stack in STACKS:
        _, beta = deepnorm_constants(
            stack, config.encoder_layers, config.decoder_layers, config.deepnorm_beta
        )
        if config.stabilizer_init == "authors":
            _draw_as_transformer_clinic(getattr(model, stack), beta)
        else:
            scale_branch_weights(getattr(model, stack), beta)


def deepnorm(config: Any) -> ResidualVariant:
    return ResidualVariant(DeepNormConnection, final_norm=False, init=init)
