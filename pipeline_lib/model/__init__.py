"""Encoder-decoder Transformer with post-LN, pre-LN, Admin, DLCL and Lipschitz init.

The names that need torch load on first use (PEP 562), so that reading configs and registries
(``pipeline_lib.model.config``, ``.registry``: the workflow, check-config, plan, report) never
imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline_lib.model.config import PRESETS, ModelConfig

if TYPE_CHECKING:
    from pipeline_lib.model.transformer import EncoderOut, TransformerModel, build_model, load_model_state

__all__ = ["PRESETS", "EncoderOut", "ModelConfig", "TransformerModel", "build_model", "load_model_state"]
_FROM_TRANSFORMER = {"EncoderOut", "TransformerModel", "build_model", "load_model_state"}


def __getattr__(name: str) -> Any:
    if name in _FROM_TRANSFORMER:
        from pipeline_lib.model import transformer

        return getattr(transformer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
