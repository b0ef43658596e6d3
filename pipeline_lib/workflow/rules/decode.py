"""The partner of ``workflow/rules/decode.smk``: decoding the evaluation split with the averaged
checkpoint and the experiment's `decoding` entry."""

from __future__ import annotations

from pipeline_lib.workflow.flags import flags
from pipeline_lib.workflow.rules.base import RuleFile


class DecodeRules(RuleFile):
    LOGS = {"translate": "{exp}.{split}"}

    def translate(self, name: str, split: str, threads: int | None = None) -> str:
        src, tgt = self.plan.exp_langs(name)
        pairs = [
            ("checkpoint", self.plan.checkpoint_avg(name)),
            ("data-dir", self.plan.eval_bin_dir(name, split)),
            ("split", split),
            ("source-lang", src),
            ("target-lang", tgt),
            ("output", self.plan.hyp_file(name, split)),
            ("output-generate", self.plan.generate_file(name, split)),
            *self.decoding(self.plan.decoding_of(name)),
            ("device", "auto"),
            ("threads", threads),
            ("no-progress", True),
            ("skip-if-diverged", self.plan.status_file(name)),
        ]
        return flags(pairs)
