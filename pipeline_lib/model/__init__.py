"""Encoder-decoder Transformer with post-LN, pre-LN, Admin, DLCL and Lipschitz init."""

from pipeline_lib.model.config import PRESETS, ModelConfig
from pipeline_lib.model.transformer import EncoderOut, TransformerModel, build_model, load_model_state

__all__ = ["PRESETS", "EncoderOut", "ModelConfig", "TransformerModel", "build_model", "load_model_state"]
