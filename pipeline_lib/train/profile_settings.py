"""The ``profile`` stage's settings, torch-free: the workflow schema reads the fields marked ``recipe``
(the profiling keys of a recipe) without loading the model."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline_lib.dataclass_cli import option
from pipeline_lib.lang_code import lang_code
from pipeline_lib.model.config import RECURSIONS

MAX_PROFILE_TOKENS = 8192


def _default_device() -> str:
    """cuda where torch sees a GPU (imported here: only the stage's flags need it)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass(frozen=True)
class ProfileSettings:
    """The flags of ``profile`` (the model's come from ModelConfig); the fields marked ``recipe`` are
    recipe keys of the workflow config, under the names it gives them."""

    data: str = option(help="binarized data directory")
    source_lang: str = option(type=lang_code, aliases=("-s",))
    target_lang: str = option(type=lang_code, aliases=("-t",))
    output: str = option(help="profile JSON to write")
    max_tokens: int = option(
        4096, "batch size of the profiling batch", recipe="profile_max_tokens", ge=1,
        doc=f"the profiling batch's target tokens (default: the recipe's max_tokens; at most {MAX_PROFILE_TOKENS})",
    )  # fmt: skip
    seed: int = option(
        1,
        recipe="profile_seed",
        ge=1,
        doc="Admin: profile once at this seed and train every run whose profiling command is otherwise "
        "the same from that one profile (Transformer-Clinic's iwslt14_de-en.md profiles with seed 1111 "
        "for all five seeds); unset, each run profiles with its own seed",
    )
    label_smoothing: float = option(0.1)
    device: str = option("cpu", choices=("cpu", "cuda"), cli_default=_default_device)
    closed_form: bool = option(
        False, "admin-torch's formula instead of a profiling pass", recipe="admin_closed_form",
        doc="admin-torch's formula instead of profiling",
    )  # fmt: skip
    recursion: str = option(
        "reference",
        "reference: next total = Var[x_i·ω_i] + Var[f_i], measured as the stream flows (the reference "
        "code); cumulative: ω_i = sqrt(1 + Σ_{j<i} Var f_j) with every ω = 1",
        choices=RECURSIONS,
        recipe="admin_recursion",
        doc="how profiling turns variances into omega: reference (default; the next total is "
        "Var[x_i*omega_i] + Var[f_i] measured as the stream flows, as the reference code does) or "
        "cumulative (omega_i = sqrt(1 + sum_{j<i} Var f_j))",
    )
