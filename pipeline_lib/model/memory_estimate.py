"""Training memory per GPU, estimated from the model's shape, the batch and the recipe, without a GPU.

What one update holds at its peak, as ``torch.cuda.max_memory_allocated`` would report it (the CUDA
context and the allocator's cached slack, ~1 GB together, come on top):

- **static**: fp32 weights and Adam's two fp32 moments, 12 bytes per parameter, and under autocast
  the 16-bit weight copies autograd keeps until each layer's backward (2 bytes per parameter). The
  fp32 gradients (4 bytes) exist during the forward pass only while micro-batches accumulate
  (``update_freq`` > 1): the trainer sets them to None after each step, and in backward they grow as
  the activations are freed, so the peak is the end of the forward pass, or 16 bytes per parameter
  when that is more;
- **activations**: the bytes autograd saves per token and layer, tensor by tensor as this code's
  layers save them (:func:`layer_bytes_per_token`). Under autocast the matmuls' inputs and outputs are
  16-bit, but the residual stream and the LayerNorms stay fp32. Dropout keeps a 1-byte mask
  (``pipeline_lib.model.dropout``) and none at p = 0. CUDA's fused attention kernels keep q, k, v,
  the output and a logsumexp and regenerate the attention-dropout mask; the math path (what the CPU
  runs under attention dropout) keeps the probabilities, the mask and the dropped copy in fp32.
  With activation checkpointing a layer keeps only its input, plus one layer's full set while it is
  recomputed;
- **logits**: the output layer's logits per target token (:data:`BYTES_PER_LOGIT`).

``tests/model/test_memory_estimate.py`` checks the activation bytes against the tensors autograd
saves on a CPU, and the totals against the peaks measured on an H200 (bench/results/).
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
WEIGHT_AND_ADAM_BYTES = 12
GRADIENT_BYTES = 4
# The 16-bit (or fp32) logits, their fp32 copy for the loss, and the log-softmax autograd keeps; the
# loss' fp32 gradient takes the copy's place in backward. An H200 measured ~12.5 B per logit
# (bench/results/gpu-nvidia-h200-evidence.json, base and big 6L-6L).
BYTES_PER_LOGIT = 12
# fairseq_fp16 (fp16 weights over fp32 masters) is modelled as autocast fp16: the same weight, Adam and
# 16-bit copy bytes; its fp16 residual stream makes the fp32 STREAM_BYTES an upper bound. Not measured.
AMP_BYTES = {"none": 4, "bf16": 2, "fp16": 2, "fairseq_fp16": 2}
STREAM_BYTES = 4  # the residual stream and the LayerNorms' inputs: fp32 under autocast too
LN_STATS_BYTES = 8  # a LayerNorm's mean and rstd, fp32, per token
MASK_BYTES = 1  # this code's dropout keeps a uint8 keep-mask


@dataclass(frozen=True)
class Shape:
    encoder_layers: int
    decoder_layers: int
    d_model: int
    ffn_dim: int
    heads: int
    vocab: int
    shared_embeddings: bool = True
    residual: str = "post_ln"


@dataclass(frozen=True)
class Recipe:
    """The training settings that change what autograd saves (ModelConfig's and the plan's defaults)."""

    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    amp: str = "none"  # none | bf16 | fp16 | fairseq_fp16
    fused_attention: bool = True  # CUDA's flash / memory-efficient SDPA kernels

    def __post_init__(self) -> None:
        if self.amp not in AMP_BYTES:
            raise ValueError(f"amp must be one of {', '.join(AMP_BYTES)}, not {self.amp!r}")


@dataclass(frozen=True)
class MemoryEstimate:
    params: int
    static_gb: float
    activations_gb: float
    logits_gb: float

    @property
    def total_gb(self) -> float:
        forward_end = self.static_gb + self.activations_gb + self.logits_gb
        return max(forward_end, self.params * (WEIGHT_AND_ADAM_BYTES + GRADIENT_BYTES) / GB)


def parameter_count(s: Shape) -> int:
    h, f = s.d_model, s.ffn_dim
    attention = 4 * h * h + 4 * h
    ffn = 2 * h * f + f + h
    norm = 2 * h
    encoder = s.encoder_layers * (attention + ffn + 2 * norm)
    decoder = s.decoder_layers * (2 * attention + ffn + 3 * norm)
    embeddings = s.vocab * h * (1 if s.shared_embeddings else 3)
    return encoder + decoder + embeddings


def _mask(p: float) -> int:
    return MASK_BYTES if p > 0 else 0


def _attention(s: Shape, r: Recipe, length: int, cross: bool) -> int:
    """One attention sub-layer, bytes per query token (the keys' side counted per source token, with
    source and target lengths taken equal)."""
    h, a, b = s.d_model, s.heads, AMP_BYTES[r.amp]
    # the projection's input (autocast's 16-bit copy, or the fp32 input itself) and its output
    projections = b * h + (b * 2 * h + b * h + b * h if cross else b * 3 * h)
    if r.fused_attention:  # q, k, v are the projection's output; the output and a logsumexp
        core = b * h + 4 * a
    else:  # math path, in fp32: q, k, v copies, the probabilities (+ mask and dropped copy), the output
        copies = 3 if r.attention_dropout > 0 else 1
        core = 4 * 3 * h + 4 * copies * a * length + b * h
        projections -= b * 3 * h  # the math path's fp32 copies of q, k, v replace the projections' outputs
    bias = b  # the key padding mask as an additive bias, one value per key
    return projections + core + bias + _sublayer_common(s, r)


def _ffn(s: Shape, r: Recipe) -> int:
    h, f, b = s.d_model, s.ffn_dim, AMP_BYTES[r.amp]
    hidden = b * f  # fc1's output after the in-place ReLU (fc2's input when there is no dropout)
    if r.activation_dropout > 0:
        hidden += (_mask(r.activation_dropout) + b) * f  # the mask and the dropped copy fc2 reads
    return b * h + hidden + _sublayer_common(s, r)


def _sublayer_common(s: Shape, r: Recipe) -> int:
    """The residual connection: the branch's dropout mask and one fp32 LayerNorm input. Admin's x * ω
    also keeps its fp32 input x (under autocast the projections keep a 16-bit copy, not x itself);
    T-Fixup and ReZero have no LayerNorm, and ReZero's α * branch keeps the branch."""
    h = s.d_model
    common = _mask(r.dropout) * h
    if s.residual not in ("t_fixup", "rezero"):
        common += STREAM_BYTES * h + LN_STATS_BYTES
    if s.residual == "rezero":
        common += AMP_BYTES[r.amp] * h
    if s.residual == "admin" and r.amp != "none":
        common += STREAM_BYTES * h
    return common


def _sub_ln_extra(s: Shape, r: Recipe, width: int) -> int:
    """Sub-LN's inner LayerNorm on ``width`` values: its fp32 input and the 16-bit copy the next
    projection reads (CUDA's autocast runs LayerNorm in fp32; the CPU's keeps 16-bit, less)."""
    return (STREAM_BYTES + AMP_BYTES[r.amp]) * width + LN_STATS_BYTES if s.residual == "sub_ln" else 0


def layer_bytes_per_token(s: Shape, r: Recipe, length: int, decoder: bool) -> int:
    """Bytes autograd keeps per target token for one layer (sentences of ``length``)."""
    self_attention = _attention(s, r, length, cross=False) + _sub_ln_extra(s, r, s.d_model)
    ffn = _ffn(s, r) + _sub_ln_extra(s, r, s.ffn_dim)
    cross = _attention(s, r, length, cross=True) if decoder else 0
    return self_attention + cross + ffn


def stack_bytes_per_token(s: Shape, r: Recipe, layers: int) -> int:
    """Per stack, outside its layers: the embedding's dropout mask, the final LayerNorm (pre-LN
    variants; counted for all) and, for DLCL, each combination's stacked layer outputs and norm."""
    h = s.d_model
    total = _mask(r.dropout) * h + STREAM_BYTES * h + LN_STATS_BYTES
    if s.residual == "dlcl":  # the k-th combination stacks k outputs: sum over k = 1 .. layers + 1
        total += STREAM_BYTES * h * (layers + 1) * (layers + 2) // 2
        total += (layers + 1) * (STREAM_BYTES * h + LN_STATS_BYTES)
    return total


def estimate_training_memory(
    s: Shape,
    tokens: int,
    recipe: Recipe = Recipe(),
    *,
    mean_length: int = 32,
    checkpointing: bool = False,
    update_freq: int = 1,
) -> MemoryEstimate:
    """Peak memory of one update with ``tokens`` target (and as many source) tokens per GPU: a bound
    for a full batch (bucketed batches fill ~95% of ``max_tokens`` on average)."""
    per_encoder = tokens * layer_bytes_per_token(s, recipe, mean_length, decoder=False)
    per_decoder = tokens * layer_bytes_per_token(s, recipe, mean_length, decoder=True)
    around = tokens * (
        stack_bytes_per_token(s, recipe, s.encoder_layers)
        + stack_bytes_per_token(s, recipe, s.decoder_layers)
        + AMP_BYTES[recipe.amp] * s.d_model  # the output projection's input
    )
    if checkpointing:  # each layer keeps its fp32 input; the layer being recomputed its full set
        kept = tokens * STREAM_BYTES * s.d_model * (s.encoder_layers + s.decoder_layers)
        activations = kept + max(per_encoder, per_decoder)
    else:
        activations = s.encoder_layers * per_encoder + s.decoder_layers * per_decoder
    params = parameter_count(s)
    static = params * WEIGHT_AND_ADAM_BYTES + (params * GRADIENT_BYTES if update_freq > 1 else 0)
    if recipe.amp != "none":  # autocast's 16-bit weight copies; checkpointing recomputes the layers'
        layer = (params - s.vocab * s.d_model) // max(s.encoder_layers + s.decoder_layers, 1)
        static += AMP_BYTES[recipe.amp] * (s.vocab * s.d_model + layer if checkpointing else params)
    return MemoryEstimate(
        params=params,
        static_gb=static / GB,
        activations_gb=(activations + around) / GB,
        logits_gb=tokens * s.vocab * BYTES_PER_LOGIT / GB,
    )
