"""Export to a fairseq 0.12 ``transformer`` checkpoint, loadable by fairseq-generate/-interactive alone.

Three differences from our model are bridged in the weights, exactly:

* ids: fairseq's dictionary starts ``<s> <pad> </s> <unk>``, ours ``<pad> <s> </s> <unk>``: the rows
  of every table are permuted (swap 0 and 1); ``dict.<lang>.txt`` is our ``vocab.txt`` (the specials
  are implicit in both);
* the decoder's start token: fairseq feeds ``</s>``, we feed ``<s>``. The decoder's input table gets
  our ``<s>`` row in fairseq's ``</s>`` place (``</s>`` is never a decoder input otherwise), so input
  table, source table and output projection are stored untied (``--share-all-embeddings`` off);
* positions: fairseq's sinusoidal table is indexed from ``padding_idx + 1`` = 2 where ours starts
  at 0, a different function. The export stores our table as fairseq's learned positions
  (``--encoder-learned-pos``), shifted to fairseq's offset; an Admin-folded model's input gain is in it.

Loading it needs ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` with torch >= 2.6, as any fairseq checkpoint
(its ``args`` is an argparse Namespace).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import Tensor

from pipeline_lib.atomic import atomic_open, copy_file, write_text
from pipeline_lib.export.plain import (
    ExportSource,
    attention_projections,
    input_tables,
    layer_norm,
    linear,
)
from pipeline_lib.model.transformer import TransformerModel

FAIRSEQ_PAD = 1  # fairseq's padding_idx: learned positions start at FAIRSEQ_PAD + 1
FAIRSEQ_EOS = 2
CHECKPOINT_NAME = "checkpoint.pt"


def fairseq_ids(vocab_size: int) -> Tensor:
    """``perm[f]`` = our id of fairseq id ``f``: <s> and <pad> trade places, the rest stay."""
    perm = torch.arange(vocab_size)
    perm[0], perm[1] = 1, 0
    return perm


def _put(state: dict[str, Tensor], prefix: str, weights: dict[str, Tensor]) -> None:
    for name, tensor in weights.items():
        state[f"{prefix}.{name}"] = tensor


def _attention(state: dict[str, Tensor], prefix: str, attn) -> None:
    for part, weights in attention_projections(attn).items():
        _put(state, f"{prefix}.{part}_proj", weights)


def _positions(table: Tensor) -> Tensor:
    """Our position table at fairseq's offset (rows 0..pad unused; the pad row zero, as fairseq's)."""
    out = torch.zeros(table.shape[0] + FAIRSEQ_PAD + 1, table.shape[1])
    out[FAIRSEQ_PAD + 1 :] = table
    return out


def fairseq_state_dict(model: TransformerModel, bos: int) -> dict[str, Tensor]:
    """The parameters of fairseq's TransformerModel under its names, in fairseq's id order."""
    state: dict[str, Tensor] = {}
    perm = fairseq_ids(model.config.tgt_vocab_size)
    for stack in ("encoder", "decoder"):
        ours_table, positions = input_tables(model, stack)
        table = ours_table[perm]
        if stack == "decoder":
            table[FAIRSEQ_EOS] = ours_table[bos]  # fairseq starts the decoder with </s>, we with <s>
        state[f"{stack}.embed_tokens.weight"] = table
        state[f"{stack}.embed_positions.weight"] = _positions(positions)
        state[f"{stack}.version"] = torch.tensor([3.0])
        ours = getattr(model, stack)
        for i, layer in enumerate(ours.layers):
            p = f"{stack}.layers.{i}"
            _attention(state, f"{p}.self_attn", layer.self_attn)
            _put(state, f"{p}.self_attn_layer_norm", layer_norm(layer.self_attn_residual.norm))
            if stack == "decoder":
                _attention(state, f"{p}.encoder_attn", layer.cross_attn)
                _put(state, f"{p}.encoder_attn_layer_norm", layer_norm(layer.cross_attn_residual.norm))
            _put(state, f"{p}.fc1", linear(layer.ffn.fc1))
            _put(state, f"{p}.fc2", linear(layer.ffn.fc2))
            _put(state, f"{p}.final_layer_norm", layer_norm(layer.ffn_residual.norm))
        if ours.final_norm is not None:
            _put(state, f"{stack}.layer_norm", layer_norm(ours.final_norm))
    state["decoder.output_projection.weight"] = model.output_projection.weight.detach().float()[perm].clone()
    return state


def fairseq_args(source: ExportSource) -> argparse.Namespace:
    """The training args of an equivalent fairseq run (what fairseq rebuilds the model from)."""
    c = source.model.config
    sides = {}
    for side in ("encoder", "decoder"):
        layers = c.encoder_layers if side == "encoder" else c.decoder_layers
        sides.update({
            f"{side}_embed_dim": c.d_model, f"{side}_ffn_embed_dim": c.ffn_dim, f"{side}_layers": layers,
            f"{side}_attention_heads": c.heads, f"{side}_normalize_before": source.pre_norm,
            f"{side}_learned_pos": True, f"{side}_layerdrop": 0.0, f"{side}_embed_path": None,
        })  # fmt: skip
    return argparse.Namespace(
        task="translation", arch="transformer", data=".", source_lang=source.src_lang,
        target_lang=source.tgt_lang, max_source_positions=c.max_positions,
        max_target_positions=c.max_positions, **sides, decoder_output_dim=c.d_model,
        decoder_input_dim=c.d_model, share_all_embeddings=False, share_decoder_input_output_embed=False,
        dropout=c.dropout, attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
        activation_fn="relu", no_token_positional_embeddings=False, no_scale_embedding=False,
        layernorm_embedding=False, adaptive_input=False, adaptive_softmax_cutoff=None,
        tie_adaptive_weights=False, no_cross_attention=False, cross_self_attention=False,
        quant_noise_pq=0.0, quant_noise_pq_block_size=8, quant_noise_scalar=0.0,
        left_pad_source=True, left_pad_target=False, criterion="cross_entropy", optimizer="adam",
        lr_scheduler="inverse_sqrt", lr=[0.0005], seed=1, bpe=None, tokenizer=None,
    )  # fmt: skip


def write_fairseq(source: ExportSource, out: Path) -> list[Path]:
    """Write checkpoint.pt, dict.<src>.txt, dict.<tgt>.txt and the subword model into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    vocab = source.vocab
    state = {
        "args": fairseq_args(source),
        "cfg": None,
        "model": fairseq_state_dict(source.model, vocab.bos),
        "optimizer_history": [
            {
                "criterion_name": "CrossEntropyCriterion",
                "optimizer_name": "Adam",
                "lr_scheduler_state": {"best": None},
                "num_updates": 0,
            },
        ],  # fmt: skip
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0}},
        "last_optimizer_state": None,
    }
    written = [out / CHECKPOINT_NAME]
    with atomic_open(written[0], "wb") as handle:
        torch.save(state, handle)
    for lang in dict.fromkeys((source.src_lang, source.tgt_lang)):
        path = out / f"dict.{lang}.txt"
        write_text(path, vocab.to_text())  # fairseq's "token count" lines
        written.append(path)
    written += copy_subword_model(source, out)
    return written


def copy_subword_model(source: ExportSource, out: Path) -> list[Path]:
    if source.subword_model is None:
        return []
    name = "bpe.codes" if source.subword == "bpe" else source.subword_model.name
    copy_file(source.subword_model, out / name)
    return [out / name]


def generate_hypotheses(log: str) -> dict[int, tuple[float, str]]:
    """fairseq-generate's ``H-<id>\\t<score>\\t<text>`` lines: sentence id -> (score, text); the
    checks of an export against fairseq read them (an empty hypothesis has no text field)."""
    hypotheses: dict[int, tuple[float, str]] = {}
    for line in log.splitlines():
        if line.startswith("H-"):
            head, score, text = (line.split("\t") + [""])[:3]
            hypotheses[int(head[2:])] = (float(score), text)
    return hypotheses
