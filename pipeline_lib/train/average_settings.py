"""The ``average`` stage's settings, and the recipe keys the workflow turns into them; torch-free, as
the workflow schema reads them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pipeline_lib.dataclass_cli import option


@dataclass(frozen=True, kw_only=True)
class AverageSettings:
    """The flags of ``average`` (fairseq's average_checkpoints.py names); the --skip-if-diverged flag
    is the placeholders' own."""

    inputs: tuple[Path, ...] | None = option(
        None, "checkpoint files to average", type=Path, nargs="+", exclusive="checkpoints"
    )
    save_dir: Path | None = option(
        None, "training directory holding checkpoint{epoch}.pt files", type=Path, exclusive="checkpoints"
    )
    num_epoch_checkpoints: int | None = option(None, "average the last N epoch checkpoints")
    num_update_checkpoints: int | None = option(None, "average the last N checkpoint_E_U.pt")
    checkpoint_upper_bound: int | None = option(
        None,
        "with --num-epoch-checkpoints: only epochs <= this (fairseq's average_checkpoints.py; e.g. 10 "
        "and 50 average epochs 41-50)",
    )
    output: Path = option(type=Path)


@dataclass(frozen=True)
class AveragingRecipe:
    """How the workflow averages a run's checkpoints: recipe keys, passed as AverageSettings' flags."""

    average_last: int = option(
        5, recipe=True, ge=1, doc="average the last N epoch (or update) checkpoints (default 5)"
    )
    average_kind: str = option(
        "epoch",
        recipe=True,
        choices=("epoch", "update"),
        doc="average checkpoint{epoch}.pt (default) or the interval checkpoint_E_U.pt files",
    )
    average_upper_bound: int | None = option(
        None,
        recipe=True,
        ge=1,
        doc="average the last average_last epoch checkpoints up to this epoch (fairseq's "
        "average_checkpoints.py --checkpoint-upper-bound); epoch averaging only",
    )

    @classmethod
    def of(cls, recipe: dict[str, Any]) -> AveragingRecipe:
        """The averaging keys of a recipe (the others are the trainer's)."""
        return cls(**{f.name: recipe[f.name] for f in fields(cls) if f.name in recipe})

    def flag_pairs(self) -> list[tuple[str, Any]]:
        return [
            (f"num-{self.average_kind}-checkpoints", self.average_last),
            ("checkpoint-upper-bound", self.average_upper_bound),
        ]
