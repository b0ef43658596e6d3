"""The partner of ``workflow/rules/evaluate.smk``: scores with signatures, the paired bootstrap's
significance (Table 3's matrix) and the fine-grained analysis."""

from __future__ import annotations

import shlex
from typing import Any

from pipeline_lib.evaluate.metric_registry import compound_split_metrics, metric_spec
from pipeline_lib.evaluate.significance_settings import SignificanceSettings
from pipeline_lib.report.table_registry import instances
from pipeline_lib.workflow.experiments import expand_group_names
from pipeline_lib.workflow.flags import flag_words, flags
from pipeline_lib.workflow.rules.base import RuleFile, block_argv


class EvaluateRules(RuleFile):
    LOGS = {"score": "{exp}.{split}", "significance": "{table}", "analyze": "analysis"}

    # ------------------------------------------------------------------ input functions
    def score_data(self, wildcards: Any) -> str:
        """The marker of the stage that writes the scored split's references."""
        return self.plan.ref_marker(self.plan.eval_dataset(wildcards.exp), wildcards.split)

    def significance_inputs(self, wildcards: Any) -> dict[str, Any]:
        base, systems, _ = self.plan.significance[wildcards.table]
        return {
            "hyps": [self.plan.hyp_file(n) for n in [base, *systems]],
            "generate": [self.plan.generate_file(n) for n in [base, *systems]],
            "data": self.plan.ref_marker(self.plan.eval_dataset(base)),
        }

    def analysis_inputs(self, wildcards: Any) -> dict[str, Any]:
        systems = self.plan.analysis_systems()
        ds = self.plan.eval_dataset(systems[0])
        return {
            "hyps": [self.plan.hyp_file(n) for n in systems],
            "data": [*self.plan.raw_marker(ds), self.plan.ref_marker(ds)],
        }

    # ------------------------------------------------------------------ command lines
    def significance_metric(self, table: str) -> str:
        """The metric a table is tested on (its ``metric`` key; sacreBLEU by default)."""
        spec = next(t.table for t in instances(self.plan.config["tables"], tabled=True) if t.name == table)
        return spec.get("metric", "bleu")

    def _tokenized_reference(self, name: str, split: str) -> list[tuple[str, Any]]:
        """Flags for tokenized BLEU: the preprocessed reference (Moses datasets) and the target language
        (hypotheses are tokenized as the reference was)."""
        tgt = self.plan.exp_langs(name)[1]
        ds = self.plan.eval_dataset(name)
        moses = self.plan.datasets[ds].get("subword", {}).get("kind", "bpe") == "bpe"
        return [
            ("ref-tok", self.plan.tokenized_reference(ds, split, tgt) if moses else None),
            ("ref-tok-meta", self.plan.ref_marker(ds, split) if moses else None),  # records the scheme
            ("moses-lang", tgt),
        ]

    def _subword_kind(self, name: str) -> str:
        """How translate's generate file's subwords are removed (fairseq's --remove-bpe)."""
        return str(self.plan.datasets[self.plan.eval_dataset(name)].get("subword", {}).get("kind", "bpe"))

    def compound_split_schemes(self, name: str) -> list[str]:
        """The compound-split schemes an experiment is scored with: those of every table that lists it
        and shows (``metrics``) or tests (``metric``) a compound-split column. A table chooses its
        scoring; tok_bleu stays the plain column."""
        wanted: set[str] = set()
        for table in instances(self.plan.config.get("tables", {}), tabled=True):
            if name in expand_group_names(table.names(), self.plan.seed_groups):
                wanted.update(m for m in [table.table.get("metric"), *table.table.get("metrics", [])] if m)
        schemes = compound_split_metrics()
        return sorted(schemes[m] for m in wanted if m in schemes)

    def score(self, name: str, split: str) -> str:
        return flags(
            [
                ("hyp", self.plan.hyp_file(name, split)),
                ("output", self.plan.score_file(name, split)),
                ("ref", self.plan.reference(name, split)),
                ("system", name),
                ("lang", self.plan.exp_langs(name)[1]),
                ("generate", self.plan.generate_file(name, split)),
                ("subword", self._subword_kind(name)),
                *self._tokenized_reference(name, split),
                ("compound-split", self.compound_split_schemes(name)),
                ("metrics", self.plan.evaluation.get("metrics")),
                ("skip-if-diverged", self.plan.status_file(name)),
            ]
        )

    def significance(self, table: str) -> str:
        """The systems' and reference's paths, and the config's ``evaluation`` keys of
        SignificanceSettings (bootstrap_samples, bootstrap_seed, alpha) as their flags."""
        base, systems, matrix = self.plan.significance[table]
        ev = self.plan.evaluation
        metric = self.significance_metric(table)
        tokenized = self._tokenized_reference(base, self.plan.split) if metric_spec(metric).tokenized else []
        generate = (
            [
                ("generate", [f"{s}={self.plan.generate_file(s)}" for s in [base, *systems]]),
                ("subword", self._subword_kind(base)),
            ]
            if metric_spec(metric).generate
            else []
        )
        head = [
            *tokenized,
            *generate,
            ("ref", self.plan.reference(base)),
            ("baseline", f"{base}={self.plan.hyp_file(base)}"),
        ]
        settings, _ = block_argv(SignificanceSettings, "evaluation", ev)
        tail = [
            ("metrics", metric),
            ("no-matrix", not matrix),
            ("systems", [f"{s}={self.plan.hyp_file(s)}" for s in systems]),
            ("output", self.plan.significance_file(table)),
        ]
        return shlex.join([*flag_words(head), *settings, *flag_words(tail)])

    def analyze(self, out_dir: str | None = None) -> str:
        out_dir = out_dir or self.plan.paths.analysis_dir
        systems = self.plan.analysis_systems()
        first = systems[0]
        src, tgt = self.plan.exp_langs(first)
        return flags(
            [
                ("ref", self.plan.reference(first)),
                ("src", self.plan.reference(first, lang=src)),
                ("train-target", f"{self.plan.raw_dir(self.plan.eval_dataset(first))}/train.{tgt}"),
                ("systems", [f"{n}={self.plan.hyp_file(n)}" for n in systems]),
                ("output-dir", out_dir),
            ]
        )
