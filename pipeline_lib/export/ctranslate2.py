"""Export to a CTranslate2 model directory through its converter API (``ctranslate2.converters``).

The spec is CTranslate2's ``TransformerSpec`` filled from our weights directly (no fairseq needed):
our fused QKV and KV projections are CTranslate2's fused layout already (rows q, k, v), positions are
stored as our own table (with an Admin-folded model's input gain), and the vocabulary keeps our ids
(``<pad>`` is named ``<blank>``, CTranslate2's convention, as its fairseq converter does). The source
gets ``</s>`` appended and the decoder starts from ``<s>``, as in our model.

Beam search settings that reproduce ``translate`` exactly: see :func:`ct2_search_options`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import Tensor

from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.export.plain import ExportSource, input_tables
from pipeline_lib.model.transformer import TransformerModel

PAD_TOKEN = "<blank>"
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")


def _np(tensor: Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy().copy()


def _linear(spec, module) -> None:
    spec.weight = _np(module.weight)
    if module.bias is not None:
        spec.bias = _np(module.bias)


def _norm(spec, norm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _inputs(spec, model: TransformerModel, stack: str) -> None:
    table, positions = input_tables(model, stack)
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _np(table)
    spec.scale_embeddings = True  # × sqrt(d_model), as ours
    spec.position_encodings.encodings = _np(positions)


def _layers(spec, model: TransformerModel, stack: str) -> None:
    ours = getattr(model, stack)
    for layer_spec, layer in zip(spec.layer, ours.layers, strict=True):
        _linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv_proj)
        _linear(layer_spec.self_attention.linear[1], layer.self_attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.self_attn_residual.norm)
        if stack == "decoder":
            _linear(layer_spec.attention.linear[0], layer.cross_attn.q_proj)
            _linear(layer_spec.attention.linear[1], layer.cross_attn.kv_proj)
            _linear(layer_spec.attention.linear[2], layer.cross_attn.out_proj)
            _norm(layer_spec.attention.layer_norm, layer.cross_attn_residual.norm)
        _linear(layer_spec.ffn.linear_0, layer.ffn.fc1)
        _linear(layer_spec.ffn.linear_1, layer.ffn.fc2)
        _norm(layer_spec.ffn.layer_norm, layer.ffn_residual.norm)
    if ours.final_norm is not None:
        _norm(spec.layer_norm, ours.final_norm)


def build_spec(source: ExportSource):
    """The filled ``ctranslate2.specs.TransformerSpec`` of ``source``."""
    from ctranslate2.specs import common_spec, transformer_spec

    c = source.model.config
    spec = transformer_spec.TransformerSpec.from_config(
        (c.encoder_layers, c.decoder_layers),
        c.heads,
        pre_norm=source.pre_norm,
        activation=common_spec.Activation.RELU,
    )
    model = source.model
    for stack in ("encoder", "decoder"):
        _inputs(getattr(spec, stack), model, stack)
        _layers(getattr(spec, stack), model, stack)
    _linear(spec.decoder.projection, model.output_projection)
    tokens = [PAD_TOKEN if i == source.vocab.pad else source.vocab.token(i) for i in range(len(source.vocab))]
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    spec.config.add_source_eos = True
    spec.config.decoder_start_token = "<s>"
    spec.config.layer_norm_epsilon = 1e-5  # torch's LayerNorm default
    return spec


def write_ctranslate2(source: ExportSource, out: Path, quantization: str = "float32") -> list[Path]:
    """Convert with a ``ctranslate2.converters.Converter``; it replaces ``out`` as a whole."""
    from ctranslate2.converters.converter import Converter

    class OurConverter(Converter):
        def _load(self):
            return build_spec(source)

    OurConverter().convert(str(out), quantization=quantization, force=True)
    return sorted(p for p in out.iterdir() if p.is_file())


def ct2_search_options(cfg: SearchConfig, max_tokens: int) -> dict:
    """``Translator.translate_batch`` options for our beam search ``cfg``, for sources whose length
    limit (``max_lengths``) is ``max_tokens`` tokens before ``</s>``.

    * length penalty: both divide the sum of log-probs by length**lenpen, but CTranslate2 counts the
      final ``</s>`` only when it returns it (``return_end_token``); we (and fairseq) always count it;
    * stopping: with a length penalty CTranslate2 stops a sentence when it holds ``beam`` finished
      hypotheses, as we do (without one it stops at the first finished best beam: same 1-best);
    * length limit: at the limit we force ``</s>``; CTranslate2 ends the hypothesis with whatever
      token it picked last, and its limit is one number per batch. Hypotheses that end before the
      limit are the same; ``max_decoding_length`` counts ``</s>``, hence ``max_tokens + 1``;
    * forbidden tokens: CTranslate2 masks a token's logit *before* the softmax, so the other tokens'
      log-probs are renormalised; we (and fairseq) mask the log-prob after it. ``min_len`` > 0 thus
      changes CTranslate2's scores of the first steps (and can change its ranking): ``min_len`` 0
      gives identical scores. ``<pad>`` and ``<s>``, which we forbid, are left alone here for the
      same reason (a trained model gives them no mass; the tests check none is generated).
    """
    if cfg.sampling or cfg.unkpen:
        raise ValueError("only beam search / greedy without --unkpen has a CTranslate2 equivalent")
    return {
        "beam_size": cfg.beam,
        "num_hypotheses": cfg.nbest,
        "length_penalty": cfg.lenpen,
        "max_decoding_length": max_tokens + 1,
        "min_decoding_length": cfg.min_len,
        "return_end_token": True,
        "return_scores": True,
        "disable_unk": cfg.no_unk,
        "max_input_length": 0,
    }
