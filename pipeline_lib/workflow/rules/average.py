"""The partner of ``workflow/rules/average.smk``: checkpoint averaging, as the recipe's averaging keys
(AveragingRecipe) say."""

from __future__ import annotations

from pipeline_lib.train.average_settings import AveragingRecipe
from pipeline_lib.workflow.flags import flags
from pipeline_lib.workflow.rules.base import RuleFile


class AverageRules(RuleFile):
    LOGS = {"average": "{exp}"}

    def average(self, name: str) -> str:
        return flags(
            [
                ("save-dir", self.plan.exp_dir(name)),
                *AveragingRecipe.of(self.plan.recipe(name)).flag_pairs(),
                ("output", self.plan.checkpoint_avg(name)),
                ("skip-if-diverged", self.plan.status_file(name)),
            ]
        )
