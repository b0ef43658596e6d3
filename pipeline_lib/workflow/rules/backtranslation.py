"""The partner of ``workflow/rules/backtranslation.smk``: the reverse model's translation of the
monolingual text in shards, and the mix of real and synthetic pairs."""

from __future__ import annotations

import shlex
from typing import Any

from pipeline_lib.backtranslation.mix_settings import MixSettings
from pipeline_lib.workflow.flags import flag_words, flags
from pipeline_lib.workflow.rules.base import RuleFile, block_argv


class BacktranslationRules(RuleFile):
    LOGS = {"translate_backtranslation": "{bt}/shard{shard}-of-{shards}", "bt_mix": "{bt}"}

    def shard_files(self, bt: str, suffix: str = "bpe") -> list[str]:
        """The back-translated shards of ``bt`` in input order (their concatenation is the synthetic side)."""
        n = self.plan.backtranslation[bt]["shards"]
        name = {"bpe": "bt_shard_bpe", "txt": "bt_shard_text"}[suffix]
        return [self.plan.paths.of(name, bt=bt, shard=k, shards=n) for k in range(n)]

    def mono(self, bt: str) -> str:
        """Subword-segmented monolingual target text (written by apply_bpe next to its meta.json)."""
        ds = self.plan.backtranslation[bt]["dataset"]
        return self.plan.paths.of("bpe_mono", ds=ds, lang=self.plan.dataset_langs(ds)[1])

    def translate_inputs(self, wildcards: Any) -> dict[str, Any]:
        spec = self.plan.backtranslation[wildcards.bt]
        rev = spec["reverse_model"]
        return {
            "checkpoint": self.plan.checkpoint_avg(rev),
            "trained": self.plan.trained_marker(rev),
            "bpe": self.plan.bpe_marker(spec["dataset"]),
        }

    def mix_inputs(self, wildcards: Any) -> dict[str, Any]:
        return {
            "real": self.plan.bpe_marker(self.plan.backtranslation[wildcards.bt]["dataset"]),
            "synthetic": self.shard_files(wildcards.bt),
        }

    def translate_gpus(self, wildcards: Any) -> Any:
        """The reverse model's translate GPUs (a CPU config or smoke gpu: false asks for none)."""
        reverse = self.plan.backtranslation[wildcards.bt]["reverse_model"]
        return self.plan.resources(reverse, "translate").get("gpu", 1)

    def backtranslate(self, bt: str, shard: int, threads: int | None = None) -> str:
        spec = self.plan.backtranslation[bt]
        rev = spec["reverse_model"]
        outputs = {
            "text": self.shard_files(bt, "txt")[shard],
            "bpe": self.shard_files(bt)[shard],
        }
        pairs = [
            ("checkpoint", self.plan.checkpoint_avg(rev)),
            ("input", self.mono(bt)),
            ("shard", f"{shard}/{spec['shards']}"),
            ("buffer-lines", spec["buffer_lines"]),
            ("output", outputs["text"]),
            ("output-subword", outputs["bpe"]),
            *self.decoding(spec["decoding"]),
            ("device", "auto"),
            ("threads", threads),
            ("no-progress", True),
            ("skip-if-diverged", self.plan.status_file(rev)),
        ]
        return flags(pairs)

    def bt_mix(self, bt: str) -> str:
        """The mix's paths, and the entry's MixSettings keys (upsample_real, tagged) as their flags."""
        spec = self.plan.backtranslation[bt]
        head = [
            ("real-dir", self.plan.data_dir(spec["dataset"], "bpe")),
            ("synthetic-src", self.shard_files(bt)),
            ("out-dir", self.plan.data_dir(f"bt-{bt}", "bpe")),
            *self.langs(spec["dataset"]),
            ("mono-tgt", self.mono(bt)),
        ]
        settings, _ = block_argv(MixSettings, "backtranslation", spec)
        return shlex.join([*flag_words(head), *settings])
