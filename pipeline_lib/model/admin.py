"""Admin (Liu et al. 2020): profiling ω, the closed form, profile files, and folding into post-LN.

Profiling (see REFERENCE.md): the model runs one training batch forward and backward in train mode.
Each stack keeps a running total starting at 1.0 and walks its sub-layers in forward order, with
ω_i = sqrt(total) set before sub-layer i runs. Two recursions for the next total:

- ``reference`` (default), as the reference code computes it, measured as the stream flows:
  total = Var[x_i · ω_i] + Var[f_i(x_i)], x_i the sub-layer's input (the embedding output for the
  first one, an LN output after that). Population variance over the whole float32 tensor.
- ``cumulative``: total += Var[f_i], i.e. ω_i = sqrt(1 + Σ_{j<i} Var f_j), with every ω = 1 while
  measuring. The two differ where Var x_i ≠ 1: at the first sub-layer (embedding variance ≈ 1.5 with
  sqrt(d)-scaled embeddings plus sinusoidal positions), and through ω's effect on later sub-layers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from pipeline_lib.atomic import write_text
from pipeline_lib.errors import CheckpointError
from pipeline_lib.model.config import RECURSIONS, ModelConfig
from pipeline_lib.model.fold import fold_to_post_ln
from pipeline_lib.model.registry import needs_profile
from pipeline_lib.model.residual import STACKS, AdminConnection
from pipeline_lib.model.transformer import Stack, TransformerModel

PROFILE_FORMAT = "deepnmt-admin-profile/1"


@dataclass
class AdminProfile:
    """Per-sub-layer ω for each stack, plus the architecture it was taken for."""

    model_config: dict[str, Any]
    omegas: dict[str, list[float]]
    method: str  # "profiled" | "closed_form"
    variances: dict[str, list[float]] = field(default_factory=dict)  # Var f_i per sub-layer
    batch: dict[str, int] = field(default_factory=dict)
    recursion: str | None = None  # for method "profiled": one of RECURSIONS
    residual_variances: dict[str, list[float]] = field(default_factory=dict)  # Var[x_i · ω_i]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PROFILE_FORMAT,
            "method": self.method,
            "recursion": self.recursion,
            "model_config": self.model_config,
            "omegas": self.omegas,
            "variances": self.variances,
            "residual_variances": self.residual_variances,
            "batch": self.batch,
        }

    def save(self, path: str | Path) -> None:
        # the bytes as json.dump wrote them before (a run's identity holds the file's sha256)
        write_text(path, json.dumps(self.to_json(), indent=2), fsync=True)

    @classmethod
    def load(cls, path: str | Path) -> AdminProfile:
        path = Path(path)
        if not path.exists():
            raise CheckpointError(
                f"Admin profile {path} does not exist: run `python -m pipeline_lib profile` first"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"Admin profile {path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise CheckpointError(f"{path} is not an Admin profile (expected format {PROFILE_FORMAT!r})")
        try:
            return cls(
                data["model_config"], data["omegas"], data["method"], data["variances"], data["batch"],
                # profiles written before the reference recursion existed used the cumulative one
                data.get("recursion", "cumulative" if data["method"] == "profiled" else None),
                data.get("residual_variances", {}),
            )  # fmt: skip
        except KeyError as exc:
            raise CheckpointError(f"Admin profile {path} lacks the key {exc}") from exc

    def check_matches(self, config: ModelConfig, source: str = "profile") -> None:
        """A profile is only valid for the architecture it was taken for."""
        expected = config.architecture()
        for key, value in expected.items():
            if self.model_config.get(key) != value:
                raise CheckpointError(
                    f"{source} was taken for {key}={self.model_config.get(key)!r} but the model has "
                    f"{key}={value!r}: re-run profiling for this architecture"
                )
        sizes = {"encoder": config.encoder_sublayers, "decoder": config.decoder_sublayers}
        for stack, size in sizes.items():
            got = len(self.omegas.get(stack, []))
            if got != size:
                raise CheckpointError(f"{source} has {got} {stack} ω values, the model has {size} sub-layers")


def _admin_connections(stack: Stack) -> list[AdminConnection]:
    connections = stack.connections()
    if not all(isinstance(c, AdminConnection) for c in connections):
        raise ValueError("Admin ω only exists in models built with residual='admin'")
    return connections


def closed_form_omega(num_sublayers: int) -> float:
    """admin-torch's profiling-free value: sqrt((N+1)/ln(N+1) - 1), N = sub-layers in the stack."""
    n = num_sublayers + 1
    return math.sqrt(n / math.log(n) - 1.0)


def closed_form_profile(config: ModelConfig) -> AdminProfile:
    omegas = {
        "encoder": [closed_form_omega(config.encoder_sublayers)] * config.encoder_sublayers,
        "decoder": [closed_form_omega(config.decoder_sublayers)] * config.decoder_sublayers,
    }
    return AdminProfile(config.to_dict(), omegas, "closed_form")


def omegas_from_variances(variances: list[float]) -> list[float]:
    """The cumulative recursion: ω_i = sqrt(1 + Σ_{j<i} Var f_j)."""
    omegas, total = [], 1.0
    for variance in variances:
        omegas.append(math.sqrt(total))
        total += variance
    return omegas


class _StreamRecorder:
    """One stack's walk for the reference recursion: sets ω_i = sqrt(total) as sub-layer i starts,
    records Var[x_i · ω_i] and Var[f_i], and carries total = their sum to the next sub-layer."""

    def __init__(self) -> None:
        self.total = 1.0
        self.omegas: list[float] = []
        self.residual: list[float] = []
        self.branch: list[float] = []

    def before(self, connection: AdminConnection, inputs: tuple[Any, ...]) -> None:
        omega = math.sqrt(self.total)
        connection.omega.data.fill_(omega)
        self.omegas.append(omega)
        x = inputs[0].detach().float()
        self.residual.append((x * omega).var(correction=0).item())

    def after(self, output: Tensor) -> None:
        self.branch.append(output.detach().float().var(correction=0).item())
        if len(self.residual) == len(self.branch):  # the reference recursion measured x_i · ω_i
            self.total = self.residual[-1] + self.branch[-1]


def profile_model(
    model: TransformerModel,
    run_batch: Callable[[TransformerModel], Tensor],
    batch_info: dict[str, int],
    recursion: str = "reference",
) -> AdminProfile:
    """Run one batch (``run_batch`` returns its loss) forward and backward and derive ω per sub-layer."""
    if recursion not in RECURSIONS:
        raise ValueError(f"unknown Admin recursion {recursion!r}; expected one of {RECURSIONS}")
    recorders = {name: _StreamRecorder() for name in STACKS}
    handles = []
    for name in STACKS:
        recorder = recorders[name]
        for connection in _admin_connections(getattr(model, name)):
            connection.omega.data.fill_(1.0)
            if recursion == "reference":
                handles.append(connection.register_forward_pre_hook(lambda m, i, r=recorder: r.before(m, i)))
            handles.append(
                connection.branch_output.register_forward_hook(lambda m, i, out, r=recorder: r.after(out))
            )
    was_training = model.training
    model.train()
    try:
        loss = run_batch(model)
        loss.backward()  # as in the reference: one forward and backward, no update
    finally:
        for handle in handles:
            handle.remove()
        for name in STACKS:  # the model is left as it came (apply_profile sets the values)
            for connection in _admin_connections(getattr(model, name)):
                connection.omega.data.fill_(1.0)
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    variances = {name: r.branch for name, r in recorders.items()}
    if recursion == "reference":
        omegas = {name: r.omegas for name, r in recorders.items()}
        residual = {name: r.residual for name, r in recorders.items()}
    else:
        omegas = {name: omegas_from_variances(values) for name, values in variances.items()}
        residual = {}
    return AdminProfile(
        model.config.to_dict(), omegas, "profiled", variances, batch_info, recursion, residual
    )


def apply_profile(model: TransformerModel, profile: AdminProfile) -> None:
    profile.check_matches(model.config)
    for name in STACKS:
        for connection, omega in zip(
            _admin_connections(getattr(model, name)), profile.omegas[name], strict=True
        ):
            connection.omega.data.fill_(omega)


def fold_admin(model: TransformerModel) -> TransformerModel:
    """A plain post-LN model computing the same function as a trained Admin model (eval mode)."""
    _admin_connections(model.encoder)
    return fold_to_post_ln(model)


def resolve_profile(config: ModelConfig, path: str | None, closed_form: bool) -> AdminProfile | None:
    """The ω profile a run trains from: loaded from ``path`` (checked against the model), admin-torch's
    closed form, or None for a variant that takes none; a wrong combination is a clear error."""
    if not needs_profile(config.residual):
        if path or closed_form:
            raise CheckpointError(
                f"--admin-profile / --admin-closed-form given but --residual {config.residual} takes no profile"
            )
        return None
    if closed_form:
        if path:
            raise CheckpointError("give either --admin-profile or --admin-closed-form, not both")
        return closed_form_profile(config)
    if not path:
        raise CheckpointError(
            f"--residual {config.residual} needs --admin-profile PATH (from `python -m pipeline_lib profile`) "
            "or --admin-closed-form"
        )
    profile = AdminProfile.load(path)
    profile.check_matches(config, source=f"Admin profile {path}")
    return profile
