"""What the partner of every rule file shares: the plan, and each rule's log path, derived from its name."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any, ClassVar

from pipeline_lib.dataclass_cli import config_argv, config_keys
from pipeline_lib.workflow.flags import Pairs, flag_words
from pipeline_lib.workflow.plan import Plan


class RuleFile:
    """The partner of one ``workflow/rules/<file>.smk``: its rules' input functions, command lines (one
    shell-safe string each) and logs, for one config (paths: :class:`~..plan.Plan` and ``paths.py``)."""

    # rule -> its log's file name under <logs>/<rule>/, from the rule's wildcards
    LOGS: ClassVar[dict[str, str]] = {}

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.config = plan.config

    def log(self, rule: str) -> str:
        """The log pattern of ``rule``: ``<logs>/<rule>/<name>.log``."""
        return self.plan.paths.log(rule, self.LOGS[rule])

    def langs(self, ds: str) -> Pairs:
        src, tgt = self.plan.dataset_langs(ds)
        return [("src", src), ("tgt", tgt)]

    def decoding(self, decoding: str) -> Pairs:
        """Every key of a `decoding` entry is a translate flag of the same name (SearchConfig's fields,
        --max-tokens and --seed)."""
        return [(key.replace("_", "-"), value) for key, value in self.config["decoding"][decoding].items()]

    def settings_argv(
        self, cls: type, marker: str, ds: str, head: Pairs, tail: Pairs, dropped: Iterable[str] = ()
    ) -> str:
        """A data stage's argv: ``head``, the flags of the dataset's ``marker:`` block keys that are
        fields of ``cls`` (less ``dropped``; a block may serve two stages: ``subword:`` holds
        learn-bpe's and apply-bpe's keys), ``tail``, and the block's word lists last."""
        settings, lists = block_argv(cls, marker, self.plan.datasets[ds].get(marker, {}), dropped)
        return shlex.join([*flag_words(head), *settings, *flag_words(tail), *lists])


def block_argv(
    cls: type, marker: str, block: dict[str, Any], dropped: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """:func:`config_argv` of the keys of a config ``block`` that fields of ``cls`` marked ``marker``
    take, under their config names (less ``dropped``); the block's other keys are other stages'."""
    own = set(config_keys(cls, marker)) - set(dropped)
    return config_argv(cls, marker, {k: v for k, v in block.items() if k in own})
