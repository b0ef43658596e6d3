"""One partner module per rule file (``workflow/rules/<file>.smk`` and ``<file>.py`` here): its rules'
input functions, command lines and logs. Paths shared between rule files stay in the path table
(``paths.py``) and the plan."""

from pipeline_lib.workflow.rules.average import AverageRules
from pipeline_lib.workflow.rules.backtranslation import BacktranslationRules
from pipeline_lib.workflow.rules.base import RuleFile
from pipeline_lib.workflow.rules.data import DataRules
from pipeline_lib.workflow.rules.decode import DecodeRules
from pipeline_lib.workflow.rules.evaluate import EvaluateRules
from pipeline_lib.workflow.rules.profile import ProfileRules
from pipeline_lib.workflow.rules.report import ReportRules
from pipeline_lib.workflow.rules.subword import SubwordRules
from pipeline_lib.workflow.rules.train import TrainRules

# in the order the Snakefile includes their rule files
RULE_FILES: tuple[type[RuleFile], ...] = (
    DataRules,
    SubwordRules,
    BacktranslationRules,
    ProfileRules,
    TrainRules,
    AverageRules,
    DecodeRules,
    EvaluateRules,
    ReportRules,
)


def rule_logs() -> dict[str, str]:
    """rule -> its log's name under <logs>/<rule>/, for every rule of every rule file."""
    return {rule: name for cls in RULE_FILES for rule, name in cls.LOGS.items()}


__all__ = [cls.__name__ for cls in RULE_FILES] + ["RULE_FILES", "RuleFile", "rule_logs"]
