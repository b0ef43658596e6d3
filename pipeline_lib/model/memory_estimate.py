"""Training memory per GPU, estimated from the model's shape and the batch, without a GPU.

What one update holds at its peak, as ``torch.cuda.max_memory_allocated`` would report it (the CUDA
context and the allocator's cached slack, ~1 GB together, come on top):

- **static**: fp32 weights, fp32 gradients and Adam's two fp32 moments, 16 bytes per parameter
  (autocast keeps the weights in fp32);
- **activations**: what autograd saves per target token and layer, counted tensor by tensor for this
  code's layers (:func:`saved_values_per_token`), at 2 bytes per value in 16-bit autocast (4 in fp32);
  the dropout masks count as values, since this code's dropout keeps its mask in the activations'
  dtype. With activation checkpointing a layer keeps only its input, plus one layer's full set while
  it is recomputed;
- **logits**: the output layer's tokens x vocabulary logits, their fp32 copy for the loss, and the
  loss' gradient (``bytes_per_logit``).

``tests/model/test_memory_estimate.py`` checks the per-layer counts against the tensors autograd really
saves (``torch.autograd.graph.saved_tensors_hooks``) and the parameter count against a built model.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
STATIC_BYTES_PER_PARAM = 16


@dataclass(frozen=True)
class Shape:
    encoder_layers: int
    decoder_layers: int
    d_model: int
    ffn_dim: int
    heads: int
    vocab: int
    shared_embeddings: bool = True


@dataclass(frozen=True)
class MemoryEstimate:
    params: int
    static_gb: float
    activations_gb: float
    logits_gb: float

    @property
    def total_gb(self) -> float:
        return self.static_gb + self.activations_gb + self.logits_gb


def parameter_count(s: Shape) -> int:
    h, f = s.d_model, s.ffn_dim
    attention = 4 * h * h + 4 * h
    ffn = 2 * h * f + f + h
    norm = 2 * h
    encoder = s.encoder_layers * (attention + ffn + 2 * norm)
    decoder = s.decoder_layers * (2 * attention + ffn + 3 * norm)
    embeddings = s.vocab * h * (1 if s.shared_embeddings else 3)
    return encoder + decoder + embeddings


def saved_values_per_token(s: Shape, length: int, decoder: bool) -> int:
    """Values autograd keeps per target token for one layer (sentences of ``length``; dropout on)."""
    h, f, a = s.d_model, s.ffn_dim, s.heads
    # self-attention: the block input, q/k/v, the softmax, its mask and dropped-out copy, the
    # context, the output dropout's mask, the norm's input
    attention = 7 * h + 3 * a * length + h
    # FFN: its input, fc1's output, the activation's output and its mask, fc2's dropout mask, the norm's input
    ffn = 4 * h + 3 * f
    values = attention + ffn
    if decoder:
        # cross-attention: its own q, context, softmax and masks (the encoder's k/v are per source token)
        values += attention - h
    return values


def estimate_training_memory(
    s: Shape,
    tokens: int,
    *,
    mean_length: int = 32,
    bytes_per_value: int = 2,
    bytes_per_logit: int = 12,
    checkpointing: bool = False,
) -> MemoryEstimate:
    """Peak memory of one update with ``tokens`` target (and as many source) tokens per GPU."""
    per_encoder_layer = tokens * saved_values_per_token(s, mean_length, decoder=False) * bytes_per_value
    per_decoder_layer = tokens * saved_values_per_token(s, mean_length, decoder=True) * bytes_per_value
    if checkpointing:  # each layer keeps its input; the layer being recomputed holds its full set
        kept = tokens * s.d_model * bytes_per_value * (s.encoder_layers + s.decoder_layers)
        activations = kept + max(per_encoder_layer, per_decoder_layer)
    else:
        activations = s.encoder_layers * per_encoder_layer + s.decoder_layers * per_decoder_layer
    params = parameter_count(s)
    return MemoryEstimate(
        params=params,
        static_gb=params * STATIC_BYTES_PER_PARAM / GB,
        activations_gb=activations / GB,
        logits_gb=tokens * s.vocab * bytes_per_logit / GB,
    )
