"""Every stage's command line for one config, in one object: the partners of the rule files together
(``pipeline_lib/workflow/rules/``), for tools and tests that build commands of several stages."""

from __future__ import annotations

from pipeline_lib.dataclass_cli import config_keys
from pipeline_lib.train.average_settings import AveragingRecipe
from pipeline_lib.train.profile_settings import ProfileSettings
from pipeline_lib.workflow.rules import RULE_FILES, rule_logs

# Recipe keys the workflow turns into the profile and average stages' flags, not passed to `train`.
WORKFLOW_RECIPE_KEYS = (*config_keys(ProfileSettings, "recipe"), *config_keys(AveragingRecipe, "recipe"))


class Commands(*RULE_FILES):
    """Arguments of each stage for one config (see :class:`~.plan.Plan` for the paths)."""

    LOGS = rule_logs()
