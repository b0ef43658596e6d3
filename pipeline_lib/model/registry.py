"""The residual-variant registry: every variant's name, table label, whether it needs an Admin-style
profile, and the factory that builds its connections.

Config validation, the train/profile CLIs, the trainer, the workflow, the tables and the plots read
this registry; nothing else names a variant. Adding a variant is one :func:`register` call with a
factory returning a :class:`~pipeline_lib.model.residual.ResidualVariant`. Factories may be given as
``"module:function"`` so that reading names and labels (the workflow, the report) does not import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline_lib.named_registry import Registry, resolve


@dataclass(frozen=True)
class ResidualSpec:
    name: str
    label: str  # shown in tables and plots
    factory: Callable[[Any], Any] | str  # ModelConfig -> ResidualVariant, or "module:function"
    needs_profile: bool = False  # trained from an ω profile (`python -m pipeline_lib profile`)

    def build(self, config: Any) -> Any:
        return resolve(self.factory)(config)


RESIDUALS: Registry[ResidualSpec] = Registry("residual variant", lambda spec: spec.name)
register, unregister, residual_spec = RESIDUALS.register, RESIDUALS.unregister, RESIDUALS.spec


def residual_names() -> tuple[str, ...]:
    return tuple(RESIDUALS)


def residual_label(name: str) -> str:
    spec = RESIDUALS.get(name)
    return spec.label if spec else name


def needs_profile(name: str) -> bool:
    return residual_spec(name).needs_profile


_IMPL = "pipeline_lib.model.residual"
register(ResidualSpec("post_ln", "Post-LN", f"{_IMPL}:post_ln"))
register(ResidualSpec("pre_ln", "Pre-LN", f"{_IMPL}:pre_ln"))
register(ResidualSpec("admin", "Admin", f"{_IMPL}:admin", needs_profile=True))
register(ResidualSpec("dlcl", "DLCL", f"{_IMPL}:dlcl"))
_STABILIZERS = "pipeline_lib.model.stabilizers"
register(ResidualSpec("deepnorm", "DeepNorm", f"{_STABILIZERS}.deepnorm:deepnorm"))
register(ResidualSpec("sub_ln", "Sub-LN", f"{_STABILIZERS}.sub_ln:sub_ln"))
register(ResidualSpec("t_fixup", "T-Fixup", f"{_STABILIZERS}.t_fixup:t_fixup"))
register(ResidualSpec("rezero", "ReZero", f"{_STABILIZERS}.rezero:rezero"))
register(ResidualSpec("b2t", "B2T", f"{_STABILIZERS}.b2t:b2t"))
register(ResidualSpec("ds_init", "DS-Init", f"{_STABILIZERS}.ds_init:ds_init"))
register(ResidualSpec("resi_dual", "ResiDual", f"{_STABILIZERS}.resi_dual:resi_dual"))
