"""The partner of ``workflow/rules/train.smk``: training, on real data or on a back-translation mix."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipeline_lib.model.registry import needs_profile
from pipeline_lib.train.config import recipe_fields
from pipeline_lib.workflow.flags import Pairs, flags
from pipeline_lib.workflow.rules.base import RuleFile


def recipe_value(value: Any) -> Any:
    """A recipe value as its flag takes it: lists (Adam's betas) in fairseq's '(0.9, 0.98)' form."""
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(str(v) for v in value) + ")"
    return value


def recipe_pairs(recipe: dict[str, Any], fields: Iterable[str]) -> Pairs:
    """(flag, value) of every field the recipe sets, in the fields' order."""
    return [(name.replace("_", "-"), recipe_value(recipe[name])) for name in fields if name in recipe]


class TrainRules(RuleFile):
    LOGS = {"train": "{exp}", "train_backtranslation": "{exp}"}

    def train_inputs(self, wildcards: Any) -> dict[str, Any]:
        inputs = {"data": self.plan.bin_marker(wildcards.exp)}
        if self.plan.needs_profile(wildcards.exp):
            inputs["profile"] = self.plan.admin_profile(wildcards.exp)
        return inputs

    def train(self, name: str, threads: int | None = None) -> str:
        """The model flags, every recipe setting the train CLI takes, and the run's own paths."""
        exp = self.plan.experiments[name]
        profiled = needs_profile(exp["residual"])
        pairs = [
            *self.plan.data_pairs(name),
            ("save-dir", self.plan.exp_dir(name)),
            *recipe_pairs(self.plan.train_recipe(name), recipe_fields()),  # max_tokens etc. for the card
            ("seed", exp.get("seed", 1)),
            ("admin-profile", self.plan.admin_profile(name) if profiled else None),
            ("num-threads", threads),
            ("progress", "lines"),
        ]
        return flags([*self.plan.model_pairs(name), *pairs])
