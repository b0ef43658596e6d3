"""Encoder-decoder Transformer for NMT (batch-first).

Token conventions (shared by trainer and decoder): source = ids + [eos];
decoder input = [bos] + ids; target = ids + [eos].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from pipeline_lib.model.checkpointing import checkpointed_call
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.dropout import Dropout
from pipeline_lib.model.init import initialize
from pipeline_lib.model.kv_cache import changed_rows, reorder_rows
from pipeline_lib.model.layers import DecoderLayer, DecoderLayerCache, EncoderLayer
from pipeline_lib.model.linear import Linear
from pipeline_lib.model.registry import residual_spec
from pipeline_lib.model.residual import ResidualVariant


def sinusoidal_positions(max_positions: int, d_model: int) -> Tensor:
    half = d_model // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / max(half - 1, 1)))
    angles = torch.arange(max_positions, dtype=torch.float32).unsqueeze(1) * freqs.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if d_model % 2:
        table = torch.cat([table, torch.zeros(max_positions, 1)], dim=1)
    return table


class TokenEmbedding(nn.Module):
    """sqrt(d)-scaled token embeddings plus sinusoidal positions, then dropout.

    A padding token's position is zero, as fairseq's (its table's padding row is zeroed:
    LiyuanLucasLiu/Transformer-Clinic@70f72b7 fairseq/fairseq/modules/sinusoidal_positional_embedding.py:51-52),
    so a padding token embeds to zero: what Admin profiling's whole-tensor variances see there.
    Outputs at real tokens do not change (padding keys are masked).

    ``input_gain`` is a per-dimension scale that is all ones (and absent) in every trained model;
    Admin folding sets it to absorb the first sub-layer's ω, which has no preceding LayerNorm.
    """

    def __init__(self, table: nn.Embedding, config: ModelConfig) -> None:
        super().__init__()
        self.table = table
        self.scale = math.sqrt(config.d_model)
        self.max_positions = config.max_positions
        self.pad_idx = config.pad_idx
        self.register_buffer("positions", sinusoidal_positions(config.max_positions, config.d_model), False)
        self.register_buffer("input_gain", None)
        self.dropout = Dropout(config.dropout)

    def set_input_gain(self, gain: Tensor) -> None:
        self.input_gain = gain.detach().clone()

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        end = start + tokens.shape[1]
        if end > self.max_positions:
            raise ValueError(f"sequence of length {end} exceeds model.max_positions={self.max_positions}")
        positions = self.positions[start:end].to(self.table.weight.dtype)
        x = self.table(tokens) * self.scale + positions * tokens.ne(self.pad_idx).unsqueeze(-1)
        if self.input_gain is not None:
            x = x * self.input_gain
        return self.dropout(x)


class Stack(nn.Module):
    """Shared machinery of encoder and decoder: embedding, layers, combiner, optional final LN."""

    def __init__(
        self, layers: list[nn.Module], embed: TokenEmbedding, variant: ResidualVariant, d: int
    ) -> None:
        super().__init__()
        self.embed = embed
        self.layers = nn.ModuleList(layers)
        self.combiner = variant.make_combiner(len(layers), d)
        self.final_norm = nn.LayerNorm(d) if variant.final_norm else None
        self.checkpoint_layers = False  # recompute each layer's activations in backward

    def connections(self) -> list[nn.Module]:
        return [conn for layer in self.layers for conn, _ in layer.sublayers()]

    def run_layers(self, x: Tensor, *layer_args, caches=None) -> Tensor:
        state = self.combiner.start(x)
        checkpointing = self.checkpoint_layers and self.training and torch.is_grad_enabled()
        for i, layer in enumerate(self.layers):
            extra = () if caches is None else (caches[i],)
            x = self.combiner.next_input(state)
            if checkpointing and caches is None:
                self.combiner.add(state, checkpointed_call(layer, x, *layer_args))
            else:
                self.combiner.add(state, layer(x, *layer_args, *extra))
        x = self.combiner.output(state)
        return self.final_norm(x) if self.final_norm is not None else x


@dataclass
class EncoderOut:
    hidden: Tensor  # (B, S, d)
    padding_mask: Tensor  # (B, S) bool, True at padding

    def reorder(self, order: Tensor) -> EncoderOut:
        """Rows become ``order``'s rows. When few rows change (sentences leaving a beam search), the
        rows are copied in place, into this output's own tensors, and the result views a prefix."""
        moved = changed_rows(order, self.hidden.shape[0])
        return EncoderOut(
            reorder_rows(self.hidden, order, moved), reorder_rows(self.padding_mask, order, moved)
        )


class DecoderCache:
    """Incremental decoding state: per-layer self-attention K/V and cached encoder K/V.

    With ``group`` = g > 1, decoder rows come in blocks of g (the beams of one sentence) that share
    one encoder row: ``decode`` then takes the encoder output *without* per-beam copies.
    """

    def __init__(self, num_layers: int, group: int = 1) -> None:
        self.layers = [DecoderLayerCache(group) for _ in range(num_layers)]
        self.group = group
        self.step = 0

    def group_order(self, order: Tensor) -> Tensor:
        """Encoder-row order for a decoder-row ``order`` that keeps each block within one sentence."""
        if self.group == 1:
            return order
        return order.view(-1, self.group)[:, 0].div(self.group, rounding_mode="floor")

    def reorder(self, order: Tensor, cross: bool = True, shared: Tensor | None = None) -> None:
        """Reorder decoder rows; ``cross=False`` skips the encoder K/V (unchanged within a sentence).
        ``shared[i]``, when given, says how many first steps of row ``i``'s new history the row already
        holds (the same tokens of the same sentence): only the later steps are copied.

        Without ``shared``, when at most half of the rows change, only those are copied, in place
        (``changed_rows``):
        beam search keeps each parent's best child in the parent's row, and when sentences finish it
        moves the last sentences into their places rather than shifting every row down. The
        self-attention K/V copy is memory-bound and otherwise moves every row's history every step."""
        if not self.layers:
            return
        first = self.layers[0].self_attn  # every layer's cache has the same steps and rows
        if shared is None:  # without the tokens: a moved row shares nothing, the others everything
            moved = changed_rows(order, first.rows)
            if moved is not None:
                shared = torch.full_like(order, first.length).index_fill_(0, moved, 0)
        cells = None if shared is None else first.unshared_cells(order, shared)
        for layer in self.layers:
            layer.self_attn.reorder(order, cells)
        if cross:
            encoder_order = self.group_order(order)
            moved = changed_rows(encoder_order, self.layers[0].cross_attn.rows)
            for layer in self.layers:
                layer.cross_attn.reorder(encoder_order, moved)


class TransformerModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        variant = residual_spec(config.residual).build(config)
        decoder_variant = (
            residual_spec(config.decoder_residual).build(config) if config.decoder_residual else variant
        )
        d = config.d_model
        src_table = nn.Embedding(config.src_vocab_size, d, padding_idx=config.pad_idx)
        tgt_table = (
            src_table
            if config.share_all_embeddings
            else nn.Embedding(config.tgt_vocab_size, d, padding_idx=config.pad_idx)
        )
        self.encoder = Stack(
            [EncoderLayer(config, variant, i) for i in range(config.encoder_layers)],
            TokenEmbedding(src_table, config),
            variant,
            d,
        )
        self.decoder = Stack(
            [DecoderLayer(config, decoder_variant, i) for i in range(config.decoder_layers)],
            TokenEmbedding(tgt_table, config),
            decoder_variant,
            d,
        )
        self.output_projection = Linear(d, config.tgt_vocab_size, bias=False)
        initialize(self, config)
        if variant.init is not None:
            variant.init(self, config)
        if config.share_decoder_input_output_embed:
            self.output_projection.weight = tgt_table.weight

    def encode(self, src_tokens: Tensor) -> EncoderOut:
        padding_mask = src_tokens.eq(self.config.pad_idx)
        hidden = self.encoder.run_layers(self.encoder.embed(src_tokens), padding_mask)
        return EncoderOut(hidden, padding_mask)

    def decode(
        self, prev_tokens: Tensor, encoder_out: EncoderOut, cache: DecoderCache | None = None
    ) -> Tensor:
        """Logits (B, T, V); with a cache only the newest position is computed (T = 1)."""
        return self.output_projection(self.decode_features(prev_tokens, encoder_out, cache))

    def decode_features(
        self, prev_tokens: Tensor, encoder_out: EncoderOut, cache: DecoderCache | None = None
    ) -> Tensor:
        """The decoder's last hidden states (B, T, d), before the output projection."""
        start = 0
        if cache is not None:
            start = cache.step
            prev_tokens = prev_tokens[:, start:]
            cache.step += prev_tokens.shape[1]
        x = self.decoder.embed(prev_tokens, start)
        caches = cache.layers if cache is not None else None
        return self.decoder.run_layers(x, encoder_out.hidden, encoder_out.padding_mask, caches=caches)

    def forward(self, src_tokens: Tensor, prev_tokens: Tensor, features_only: bool = False) -> Tensor:
        """Logits (B, T, V), or with ``features_only`` the hidden states the output projection reads
        (the trainer's chunked loss projects them itself)."""
        encoder_out = self.encode(src_tokens)
        if features_only:
            return self.decode_features(prev_tokens, encoder_out)
        return self.decode(prev_tokens, encoder_out)

    def new_cache(self, group: int = 1) -> DecoderCache:
        return DecoderCache(self.config.decoder_layers, group)

    def set_activation_checkpointing(self, enabled: bool) -> None:
        self.encoder.checkpoint_layers = self.decoder.checkpoint_layers = enabled

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build_model(config: ModelConfig) -> TransformerModel:
    return TransformerModel(config)


def load_model_state(model: TransformerModel, state: dict[str, Tensor]) -> None:
    """load_state_dict that also restores the input gains a folded Admin model carries."""
    for name in ("encoder", "decoder"):
        gain = state.get(f"{name}.embed.input_gain")
        if gain is not None:
            getattr(model, name).embed.set_input_gain(gain)
    model.load_state_dict(state, strict=True)
