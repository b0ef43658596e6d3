"""What every export starts from: a checkpoint's model as a plain post-LN or pre-LN Transformer.

A standard Transformer (fairseq's ``transformer``, CTranslate2's ``TransformerSpec``) has one residual
layout per model: ``LN(x + f(x))`` or ``x + f(LN(x))`` with a final LN, layers stacked one on the other.
Admin and DeepNorm scale the shortcut (``LN(x·w + f(x))``) and fold into post-LN exactly
(``model/fold.py``); the folded model keeps a per-dimension gain on each stack's embedding, which the
exporters multiply into the embedding tables and position tables. Variants with another structure are
refused, naming what the plain Transformer lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from pipeline_lib.checkpoint import load_model
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.inputs import resolve_data
from pipeline_lib.errors import ConfigError
from pipeline_lib.model.attention import MultiheadAttention
from pipeline_lib.model.fold import fold_to_post_ln
from pipeline_lib.model.residual import STACKS, LayerCombiner, PostLNConnection, PreLNConnection
from pipeline_lib.model.transformer import TransformerModel

# Why a variant is not a plain Transformer (the refusal's one line).
UNEXPRESSIBLE = {
    "dlcl": "each layer reads a learned weighted sum of all earlier layers' outputs, not the previous layer's",
    "rezero": "it has no LayerNorm and scales each branch by a learned scalar (x + a·f(x))",
    "t_fixup": "it has no LayerNorm at all",
    "resi_dual": "it carries a second, un-normalised residual stream beside the post-LN one",
    "b2t": "each layer's input is added back after its last sub-layer (a bottom-to-top shortcut)",
    "sub_ln": "it has a LayerNorm inside every attention and FFN branch",
}


@dataclass
class ExportSource:
    """A checkpoint ready for export: the plain model and what travels with it."""

    model: TransformerModel  # plain post-LN or pre-LN, eval mode, fp32, on the CPU
    pre_norm: bool
    vocab: Vocabulary
    src_lang: str
    tgt_lang: str
    residual: str  # the trained variant (before folding)
    subword_model: Path | None  # BPE codes or SentencePiece model of the data, when recorded
    subword: str  # "bpe", "spm" or "none"
    bin_dir: Path | None = None  # the data directory (its meta.json leads to the raw-text recipe)


def plain_transformer(model: TransformerModel) -> tuple[TransformerModel, bool]:
    """``model`` as a plain post-LN (False) or pre-LN (True) Transformer: folded when its shortcuts are
    scaled (Admin, DeepNorm); ConfigError naming the reason when it cannot be one."""
    residual = model.config.residual
    if model.config.decoder_residual:
        raise ConfigError(
            f"residual={residual} with decoder_residual={model.config.decoder_residual} cannot be exported: "
            "the export writes one layout (post-LN or pre-LN) for both stacks"
        )
    if residual in UNEXPRESSIBLE:
        raise ConfigError(
            f"residual={residual} cannot be exported as a standard Transformer: {UNEXPRESSIBLE[residual]}"
        )
    connections = model.encoder.connections() + model.decoder.connections()
    if all(hasattr(c, "shortcut_scale") for c in connections):
        model = fold_to_post_ln(model).eval()
        connections = model.encoder.connections() + model.decoder.connections()
    kinds = {type(c) for c in connections}
    plain_stacks = all(type(getattr(model, s).combiner) is LayerCombiner for s in STACKS)
    inner = any(getattr(m, "inner_norm", None) is not None for m in model.modules())
    if kinds == {PostLNConnection} and plain_stacks and not inner:
        pre_norm = False
    elif kinds == {PreLNConnection} and plain_stacks and not inner:
        pre_norm = True
    else:
        names = ", ".join(sorted(k.__name__ for k in kinds))
        raise ConfigError(
            f"residual={residual} cannot be exported as a standard Transformer: its connections ({names}) "
            "are neither plain post-LN nor pre-LN, nor scaled shortcuts that fold into post-LN"
        )
    final = [getattr(model, s).final_norm is not None for s in STACKS]
    if final != [pre_norm, pre_norm]:
        raise ConfigError(f"residual={residual}: a final LayerNorm where the standard layout has none")
    return model, pre_norm


def load_export_source(checkpoint: str, data_dir: str | None = None) -> ExportSource:
    model, meta = load_model(checkpoint, "cpu")
    info = resolve_data(meta, data_dir, checkpoint)
    if len(info.vocab) != model.config.tgt_vocab_size or len(info.vocab) != model.config.src_vocab_size:
        raise ConfigError(
            f"{info.bin_dir / 'vocab.txt'} has {len(info.vocab)} entries; the model's vocabularies have "
            f"{model.config.src_vocab_size} and {model.config.tgt_vocab_size} (one joint vocabulary expected)"
        )
    residual = model.config.residual
    plain, pre_norm = plain_transformer(model)
    data = meta.get("data") or {}
    src_lang = data.get("src_lang") or info.meta.get("src_lang") or "src"
    tgt_lang = data.get("tgt_lang") or info.meta.get("tgt_lang") or "tgt"
    recorded = info.meta.get("subword_model")
    subword_model = info.bin_dir / recorded if recorded and (info.bin_dir / recorded).is_file() else None
    return ExportSource(
        plain,
        pre_norm,
        info.vocab,
        src_lang,
        tgt_lang,
        residual,
        subword_model,
        info.meta.get("subword", "none"),
        info.bin_dir,
    )


# ---------------------------------------------------------------- weights in a toolkit-neutral form
def input_tables(model: TransformerModel, stack: str) -> tuple[Tensor, Tensor]:
    """(token table, position table) of a stack with its input gain multiplied in:
    (table·√d + pos)·g = (table·g)·√d + pos·g."""
    embed = getattr(model, stack).embed
    table = embed.table.weight.detach().float()
    positions = embed.positions.detach().float()
    if embed.input_gain is not None:
        gain = embed.input_gain.detach().float()
        table, positions = table * gain, positions * gain
    return table.clone(), positions.clone()


def linear(module: nn.Linear, rows: slice = slice(None)) -> dict[str, Tensor]:
    weights = {"weight": module.weight.detach().float()[rows].clone()}
    if module.bias is not None:
        weights["bias"] = module.bias.detach().float()[rows].clone()
    return weights


def attention_projections(attn: MultiheadAttention) -> dict[str, dict[str, Tensor]]:
    """q/k/v/out projections of our fused attention (rows of qkv_proj: q, k, v; of kv_proj: k, v)."""
    d = attn.out_proj.in_features
    if attn.self_attention:
        fused, parts = attn.qkv_proj, {"q": 0, "k": 1, "v": 2}
    else:
        fused, parts = attn.kv_proj, {"k": 0, "v": 1}
    out = {name: linear(fused, slice(i * d, (i + 1) * d)) for name, i in parts.items()}
    if not attn.self_attention:
        out["q"] = linear(attn.q_proj)
    out["out"] = linear(attn.out_proj)
    return out


def layer_norm(norm: nn.LayerNorm) -> dict[str, Tensor]:
    return {"weight": norm.weight.detach().float().clone(), "bias": norm.bias.detach().float().clone()}


def summary(source: ExportSource) -> dict[str, Any]:
    c = source.model.config
    return {
        "trained_residual": source.residual,
        "layout": "pre-LN" if source.pre_norm else "post-LN",
        "encoder_layers": c.encoder_layers,
        "decoder_layers": c.decoder_layers,
        "d_model": c.d_model,
        "ffn_dim": c.ffn_dim,
        "heads": c.heads,
        "vocab_size": len(source.vocab),
        "max_positions": c.max_positions,
    }
