"""The partner of ``workflow/rules/profile.smk``: Admin's profiling pass (Plan.profile_pairs: the
recipe's profile_seed replaces the run's)."""

from __future__ import annotations

from pipeline_lib.workflow.flags import flags
from pipeline_lib.workflow.rules.base import RuleFile


class ProfileRules(RuleFile):
    LOGS = {"profile_admin": "{exp}"}

    def profile(self, name: str, with_output: bool = True) -> str:
        output = [("output", self.plan.admin_profile(name))] if with_output else []
        return flags([*self.plan.model_pairs(name), *self.plan.profile_pairs(name), *output])
