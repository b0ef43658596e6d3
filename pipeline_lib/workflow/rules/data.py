"""The partner of ``workflow/rules/data.smk``: raw corpora (demo, ding, download, monolingual text) and
Moses preprocessing."""

from __future__ import annotations

import shlex
from typing import Any

from pipeline_lib.data.preprocess import PreprocessSettings
from pipeline_lib.workflow.flags import flags
from pipeline_lib.workflow.rules.base import RuleFile


class DataRules(RuleFile):
    LOGS = {
        "prepare_demo": "{ds}",
        "prepare_ding": "{ds}",
        "download": "{ds}",
        "monolingual": "{ds}.{lang}",
        "download_mono": "{ds}.{lang}",
        "preprocess": "{ds}",
        "preprocess_test": "{ds}",
    }

    def preprocess_inputs(self, wildcards: Any) -> dict[str, Any]:
        inputs: dict[str, Any] = {"raw": self.plan.raw_marker(wildcards.ds)}
        mono = self.plan.mono_raw(wildcards.ds)
        if mono:
            inputs["mono"] = mono
        return inputs

    def prepare_demo(self, ds: str) -> str:
        demo = self.plan.datasets[ds].get("demo", {})
        books = [
            (key.replace("_", "-"), demo[key])
            for key in ("valid_books", "test_books", "mono_books")
            if key in demo
        ]
        # An empty book list stays on the command line: it means "no such split", not "the default".
        words = [w for name, value in books for w in ([f"--{name}", *value])]
        return flags([("out-dir", self.plan.data_dir(ds, "raw")), *self.langs(ds)]) + (
            " " + shlex.join(words) if words else ""
        )

    def prepare_ding(self, ds: str) -> str:
        ding = self.plan.datasets[ds].get("ding", {})
        return flags(
            [
                ("out-dir", self.plan.data_dir(ds, "raw")),
                *self.langs(ds),
                ("valid-size", ding.get("valid_size")),
                ("test-size", ding.get("test_size")),
                ("seed", ding.get("seed")),
            ]
        )

    def download(self, ds: str) -> str:
        return flags(
            [
                ("recipe", self.plan.datasets[ds]["recipe"]),
                ("out-dir", self.plan.paths.of("dataset_dir", ds=ds)),
                ("manifest-copy", self.plan.raw_marker(ds)[0]),
                *self._mirror(),
            ]
        )

    def download_mono(self, ds: str) -> str:
        mono = self.plan.datasets[ds]["mono"]
        output = self.plan.mono_raw(ds)
        return flags(
            [
                ("mono-recipe", mono["recipe"]),
                ("out-dir", self.plan.paths.of("orig_mono_dir", ds=ds)),
                ("output", output),
                ("max-lines", mono.get("max_lines")),
                *self._mirror(),
            ]
        )

    def _mirror(self) -> list[tuple[str, Any]]:
        dl = self.plan.config.get("download", {})
        return [("mirror", dl.get("mirror")), ("checksums", dl.get("checksums"))]

    def preprocess(self, ds: str, workers: int | None = None, *, test: bool = False) -> str:
        """Training side (train, valid, mono) into tok/, or, with ``test``, the test split alone into
        tok-test/: editing a test file then never reruns what training reads. The dataset's
        ``preprocess:`` keys are PreprocessSettings' fields, passed as their flags."""
        d = self.plan.datasets[ds]
        # clean_after bpe: the length/ratio limits go to apply-bpe; here only empty/over-long lines go
        after_bpe = d.get("preprocess", {}).get("clean_after", "tokenize") == "bpe"
        dropped = {"ratio", "min_len", "max_len"} if after_bpe else set()
        if test:
            dropped |= {"clean_after", "clean_splits"}  # test is never cleaned
        elif not after_bpe:
            dropped.add("clean_after")  # tokenize, the default: left off the command line
        head = [
            ("in-dir", self.plan.raw_dir(ds)),
            ("out-dir", self.plan.data_dir(ds, "tok-test" if test else "tok")),
            *self.langs(ds),
            ("splits", ["test"] if test else ["train", "valid", "mono"]),
        ]
        tail = [("no-tokenize", d.get("subword", {}).get("kind") == "spm"), ("workers", workers)]
        return self.settings_argv(PreprocessSettings, "preprocess", ds, head, tail, dropped)
