"""The partner of ``workflow/rules/subword.smk``: joint subword learning and application, binarization."""

from __future__ import annotations

from typing import Any

from pipeline_lib.data.apply_subword import ApplySettings
from pipeline_lib.data.binarize import BinarizeSettings
from pipeline_lib.data.learn_subword import LearnSettings
from pipeline_lib.workflow.flags import Pairs, flags
from pipeline_lib.workflow.rules.base import RuleFile


class SubwordRules(RuleFile):
    LOGS = {
        "learn_bpe": "{ds}",
        "apply_bpe": "{ds}",
        "apply_bpe_test": "{ds}",
        "binarize": "{ds}",
        "binarize_test": "{ds}",
    }

    @staticmethod
    def _length_limits(p: dict[str, Any]) -> Pairs:
        """clean-corpus-n's -ratio, min and max (the stage's defaults where the config sets none)."""
        return [("ratio", p.get("ratio")), ("min-len", p.get("min_len")), ("max-len", p.get("max_len"))]

    def learn_bpe(self, ds: str, workers: int | None = None) -> str:
        head = [("in-dir", self.plan.data_dir(ds, "tok")), ("model-dir", self.plan.data_dir(ds, "subword")),
                *self.langs(ds)]  # fmt: skip
        return self.settings_argv(LearnSettings, "subword", ds, head, [("workers", workers)])

    def apply_bpe(self, ds: str, workers: int | None = None, *, test: bool = False) -> str:
        suffix = "-test" if test else ""
        # fairseq's WMT'14 En-Fr cleans the segmented train and valid (clean_after: bpe); test never
        cleaned = [] if test else [sp for sp in ("train", "valid") if self.plan.cleaned_after_bpe(ds, sp)]
        limits = self._length_limits(self.plan.datasets[ds].get("preprocess", {})) if cleaned else []
        head = [
            ("in-dir", self.plan.data_dir(ds, f"tok{suffix}")),
            ("model-dir", self.plan.data_dir(ds, "subword")),
            ("out-dir", self.plan.data_dir(ds, f"bpe{suffix}")),
            *self.langs(ds),
            ("splits", ["test"] if test else ["train", "valid", "mono"]),
        ]
        tail = [("clean-splits", cleaned), *limits, ("workers", workers)]
        return self.settings_argv(ApplySettings, "subword", ds, head, tail)

    def binarize(self, ds: str, workers: int | None = None) -> str:
        head = [("in-dir", self.plan.data_dir(ds, "bpe")), ("out-dir", self.plan.data_dir(ds, "bin")),
                *self.langs(ds)]  # fmt: skip
        tail = [("splits", ["train", "valid"]), ("workers", workers)]
        return self.settings_argv(BinarizeSettings, "binarize", self.plan.base_dataset(ds), head, tail)

    def binarize_test(self, ds: str, workers: int | None = None) -> str:
        """The test split with the training vocabulary of ``ds`` (a back-translation mix reads its base
        dataset's test text), into bin-test/: a directory translate can read by itself."""
        return flags(
            [
                ("in-dir", self.plan.data_dir(self.plan.base_dataset(ds), "bpe-test")),
                ("out-dir", self.plan.data_dir(ds, "bin-test")),
                *self.langs(ds),
                ("vocab", f"{self.plan.data_dir(ds, 'bin')}/vocab.txt"),
                ("splits", ["test"]),
                ("workers", workers),
            ]
        )
