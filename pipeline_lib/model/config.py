"""The one validated configuration of an encoder-decoder Transformer."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline_lib.dataclass_cli import flag_name
from pipeline_lib.errors import ConfigError
from pipeline_lib.field_spec import check_fields
from pipeline_lib.model.registry import residual_names

# name -> (d_model, ffn_dim, heads)
PRESETS: dict[str, tuple[int, int, int]] = {
    "base": (512, 2048, 8),
    "big": (1024, 4096, 16),
    "768": (768, 3072, 12),
}
DLCL_NORMS = ("pre", "post")
INITS = ("xavier", "lipschitz")
# How Admin profiling turns the measured variances into omega (pipeline_lib/model/admin.py).
RECURSIONS = ("reference", "cumulative")
# Where a stabilizer's paper and its authors' code disagree, both (pipeline_lib/model/stabilizers/):
DS_INIT_VARIANTS = ("code", "paper")  # bound × l^(-1/4) (bzhangGo/zero) or × l^(-1/2) (the paper)
DEEPNORM_BETAS = ("paper", "torchscale")  # encoder β 0.87·(N⁴M)^(-1/16) or 1.15·(N⁴M)^(-1/16)
# DeepNorm / B2T / DS-Init start from their authors' own base init, or from the fairseq base every
# other method shares (then the method's factor): pipeline_lib/model/stabilizers/{deepnorm,b2t,ds_init}.py
STABILIZER_INITS = ("authors", "fairseq")
# A decoder of another layout than its encoder: the Admin paper's Table 1 (Post-LN encoder, Pre-LN
# decoder). Only the two plain layouts mix: every other variant scales or combines across both stacks.
HYBRID_RESIDUALS = ("post_ln", "pre_ln")


def hybrid_problem(residual: str, decoder_residual: str | None) -> str | None:
    """Why a decoder layout cannot go with this encoder's (None: it can, or none is set); the model
    and the workflow's config check both ask."""
    if decoder_residual and residual not in HYBRID_RESIDUALS:
        return f"needs a post_ln or pre_ln encoder, not residual={residual}: only the plain layouts mix"
    return None


# Fields that change the set of residual sub-layers: an Admin profile is only valid for these.
ARCHITECTURE_FIELDS = ("encoder_layers", "decoder_layers", "d_model", "ffn_dim", "heads", "residual")

# torch.compile modes `train --compile-mode` takes (pipeline_lib/model/compile.py); here, torch-free, for the
# config layer and the workflow schema
COMPILE_MODES = ("default", "reduce-overhead")


def _model(default: Any, help: str | None = None, **meta: Any) -> Any:
    """A model flag; ``meta`` may give its choices and bounds (pipeline_lib/field_spec.py: checked in
    __post_init__, and a ``recipe`` field's workflow schema entry is generated from them)."""
    return dataclasses.field(default=default, metadata={"help": help, "group": "model", **meta})


def _internal(default: Any, **meta: Any) -> Any:
    """A field set by the data or fixed by the format, not a flag."""
    return dataclasses.field(default=default, metadata={"cli": False, **meta})


def _preset_override(default: int, what: str) -> Any:
    # The flag defaults to None: the --arch preset's value, unless given.
    return _model(default, f"override the preset's {what}", cli_default=lambda: None, ge=1)


@dataclass(frozen=True)
class ModelConfig:
    """Every model setting; `train` and `profile` derive their model flags from these fields
    (``--arch`` picks the preset that ``--d-model``/``--ffn-dim``/``--heads`` override)."""

    src_vocab_size: int = _internal(dataclasses.MISSING, ge=1)
    tgt_vocab_size: int = _internal(dataclasses.MISSING, ge=1)
    encoder_layers: int = _model(6, ge=1)
    decoder_layers: int = _model(6, ge=1)
    d_model: int = _preset_override(512, "d_model")
    ffn_dim: int = _preset_override(2048, "FFN size")
    heads: int = _preset_override(8, "attention heads")
    # The dropout trio is a training recipe's to set (workflow recipes pass them with the model flags).
    dropout: float = _model(0.1, recipe=True, ge=0, lt=1)
    attention_dropout: float = _model(0.0, recipe=True, ge=0, lt=1)
    activation_dropout: float = _model(0.0, recipe=True, ge=0, lt=1)
    residual: str = _model(
        "post_ln", "residual variant (pipeline_lib/model/registry.py)", choices=residual_names
    )
    decoder_residual: str = _model(
        "",
        "the decoder's residual variant where it differs from --residual: post_ln or pre_ln, with a "
        "post_ln or pre_ln encoder (the Admin paper's Table 1 hybrid); empty: --residual",
        choices=("", *HYBRID_RESIDUALS),
    )
    dlcl_norm: str = _model("pre", choices=DLCL_NORMS)
    init: str = _model("xavier", choices=INITS)
    # Init variants of two stabilizers (ignored by the others); recipes may set them.
    ds_init_variant: str = _model(
        "code",
        "DS-Init bound: code (the authors' released code, Xavier × l^-1/4; default) or paper (× l^-1/2)",
        choices=DS_INIT_VARIANTS,
        recipe=True,
    )
    stabilizer_init: str = _model(
        "authors",
        "base init of DeepNorm, B2T and DS-Init: authors (as each method's released code draws its weights; "
        "default) or fairseq (the fairseq base every other method starts from, times the method's factor)",
        choices=STABILIZER_INITS,
        recipe=True,
    )
    deepnorm_beta: str = _model(
        "paper",
        "DeepNorm encoder beta: paper (0.87 (N^4 M)^-1/16; default) or torchscale (1.15 (N^4 M)^-1/16)",
        choices=DEEPNORM_BETAS,
        recipe=True,
    )
    # Joint vocabulary: one table for source, target input and output projection (fairseq's
    # --share-all-embeddings). Off: separate encoder and decoder tables over the same vocabulary, the
    # decoder's still tied to the output projection (Xu et al.'s Neutron: share_emb False,
    # bindDecoderEmb True); recipes may set it.
    share_all_embeddings: bool = _model(
        True,
        "separate encoder and decoder embedding tables (the decoder's stays tied to the output projection)",
        flag="--no-share-all-embeddings",
        recipe=True,
        doc="one embedding table for encoder, decoder and output projection (default true, fairseq's "
        "--share-all-embeddings); false: separate encoder and decoder tables over the joint vocabulary, "
        "the decoder's still tied to the output projection",
    )
    share_decoder_input_output_embed: bool = _internal(True)
    max_positions: int = _model(1024, ge=1)
    pad_idx: int = _internal(0)

    def __post_init__(self) -> None:
        check_fields(self, lambda name: f"model.{name}")  # the fields' choices and bounds
        if problem := hybrid_problem(self.residual, self.decoder_residual):
            raise ConfigError(f"model.decoder_residual={self.decoder_residual} {problem}")
        if self.d_model % self.heads:
            raise ConfigError(f"model.d_model={self.d_model} is not divisible by model.heads={self.heads}")
        if self.share_all_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ConfigError(
                "model.share_all_embeddings needs a joint vocabulary, but "
                f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )
        if not 0 <= self.pad_idx < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ConfigError(f"model.pad_idx={self.pad_idx} is outside the vocabulary")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def encoder_sublayers(self) -> int:
        return 2 * self.encoder_layers

    @property
    def decoder_sublayers(self) -> int:
        return 3 * self.decoder_layers

    def architecture(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ARCHITECTURE_FIELDS}

    def describe(self) -> str:
        text = f"{self.encoder_layers}L-{self.decoder_layers}L d={self.d_model} {self.residual}"
        text += f"/{self.decoder_residual}" if self.decoder_residual else ""
        return text + (f"({self.dlcl_norm})" if self.residual == "dlcl" else "") + f" init={self.init}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "model") -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}"
            )
        return cls(**data)

    @classmethod
    def from_preset(cls, preset: str, **overrides: Any) -> ModelConfig:
        if preset not in PRESETS:
            raise ConfigError(f"model preset {preset!r} is not one of {', '.join(PRESETS)}")
        d_model, ffn_dim, heads = PRESETS[preset]
        fields = {"d_model": d_model, "ffn_dim": ffn_dim, "heads": heads}
        fields.update(overrides)
        return cls.from_dict(fields)


def model_recipe_defaults() -> dict[str, Any]:
    """Model settings a workflow recipe may give (the architecture comes from widths and experiments),
    with the value each takes when a recipe leaves it out."""
    return {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.metadata.get("recipe")}


def model_recipe_fields() -> tuple[str, ...]:
    return tuple(model_recipe_defaults())


def model_recipe_pairs(recipe: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(flag without its dashes, value) of each model setting ``recipe`` gives, as `train` parses it
    (dataclass_cli): a switch is on exactly when the recipe's value differs from the default, so
    ``share_all_embeddings: false`` gives ``--no-share-all-embeddings`` and ``true`` gives nothing."""
    pairs: list[tuple[str, Any]] = []
    for field in dataclasses.fields(ModelConfig):
        if not field.metadata.get("recipe") or field.name not in recipe:
            continue
        value = recipe[field.name]
        if isinstance(field.default, bool):
            value = value != field.default
        pairs.append((field.metadata.get("flag", flag_name(field.name)).removeprefix("--"), value))
    return pairs
