"""The partner of ``workflow/rules/report.smk``: the report spec (the experiments the tables show, their
settings, scores and logs; the stability grid) and the report rules' inputs."""

from __future__ import annotations

from typing import Any

from pipeline_lib.divergence.rule import describe_rule
from pipeline_lib.model.config import model_recipe_defaults
from pipeline_lib.train.config import recipe_defaults, stuck_after
from pipeline_lib.workflow.rules.base import RuleFile


class ReportRules(RuleFile):
    LOGS = {
        "report_spec": "spec",
        "curves_spec": "curves_spec",
        "report": "tables",
        "learning_curves": "learning_curves",
        "stability_map": "stability_map",
    }

    def table_inputs(self) -> dict[str, list[str]]:
        """What the tables read besides the spec: every tabled run's score and conclusion, the
        significance files, and the data markers whose cleaning counts they show."""
        runs = self.plan.table_experiments()
        return {
            "scores": [self.plan.score_file(n) for n in runs],
            "trained": [self.plan.trained_marker(n) for n in runs],
            "significance": [self.plan.significance_file(t) for t in self.plan.significance],
            "data": [self.plan.ref_marker(ds) for ds in self.report_datasets()],
        }

    def preprocess_markers(self, ds: str) -> list[str]:
        """Both preprocess outputs of ``ds``: the training side and, when evaluated, the test split."""
        markers = [self.plan.tok_marker(ds, split) for split in ("valid", self.plan.split)]
        return list(dict.fromkeys(markers))

    def data_markers(self, ds: str) -> list[str]:
        """The meta.json files whose cleaning counts the report shows: preprocess's, and apply-bpe's
        when it cleans (``clean_after: bpe``)."""
        after_bpe = any(self.plan.cleaned_after_bpe(ds, split) for split in ("train", "valid"))
        return self.preprocess_markers(ds) + ([self.plan.bpe_marker(ds)] if after_bpe else [])

    def experiment_info(self, name: str) -> dict[str, Any]:
        exp = self.plan.experiments[name]
        width = self.plan.width(name)
        return {
            "label": exp.get("label", name),
            "dataset": exp["dataset"],
            "encoder_layers": exp["encoder_layers"],
            "decoder_layers": exp["decoder_layers"],
            "width": width.get("label", exp["width"]),
            "d_model": width.get("d_model"),
            "residual": exp["residual"],
            # only where set: every other report spec (and its digest) stays as it was
            **({"decoder_residual": exp["decoder_residual"]} if exp.get("decoder_residual") else {}),
            "init": exp.get("init", "xavier"),
            "backtranslation": exp.get("backtranslation"),
            "seed": exp.get("seed", 1),
            "lr": self.plan.recipe(name)["lr"],
            "recipe": self.plan.recipe(name),  # the tables name the settings where rows differ
            "decoding": {
                "name": self.plan.decoding_of(name),
                **self.plan.config["decoding"][self.plan.decoding_of(name)],
            },
            "score": self.plan.score_file(name),
            "status": self.plan.status_file(name),
            "train_log": self.plan.train_log(name),
        }

    def spec(self) -> dict[str, Any]:
        """The report spec: what the tables, the curves and the stability map read."""
        spec = {
            "split": self.plan.split,
            "experiments": {n: self.experiment_info(n) for n in self.plan.table_experiments()},
            "tables": self.plan.config["tables"],
            "groups": {
                g: {"label": self.plan.config["experiments"][g].get("label", g), "runs": runs}
                for g, runs in self.plan.seed_groups.items()
                if g in self.plan.table_names()
            },
            "significance": {t: self.plan.significance_file(t) for t in self.plan.significance},
            "alpha": self.plan.evaluation["alpha"],
            "translation_floor": self.plan.evaluation["translation_floor"],
            "paper_tolerance": self.plan.evaluation["paper_tolerance"],
            "tables_path": self.plan.paths.tables,
            "data": {ds: self.data_markers(ds) for ds in self.report_datasets()},
        }
        if self.plan.stability:
            spec["stability"] = {
                "runs": {
                    n: {
                        **e["stability"],
                        "status": self.plan.status_file(n),
                        "train_log": self.plan.train_log(n),
                        "score": self.plan.score_file(n) if self.plan.stability.get("decode") else None,
                    }
                    for n, e in self.plan.stability_runs.items()
                },
                **{
                    k: self.plan.stability.get(k)
                    for k in ("methods", "lrs", "betas2", "depths", "max_update", "paper")
                },
                **self.stability_setup(),
            }
        return spec

    def stability_setup(self) -> dict[str, Any]:
        """The map's recipe and divergence rule in words (every run of the grid shares them)."""
        first = next(iter(self.plan.stability_runs))
        rec = {
            **recipe_defaults(),
            **model_recipe_defaults(),
            **self.plan.recipe(first),
        }  # as the trainer reads it
        stab = self.plan.stability or {}
        window, warmup = rec["divergence_window"], rec["warmup_updates"]
        after = stuck_after(rec["divergence_after"], warmup, window)
        width = self.plan.width(first)
        setup = (
            f"{width.get('label', stab['width'])} models on {stab['dataset']}: {rec['optimizer']} "
            f"with beta1 {rec['adam_betas'][0]}, "
            + ("no warm-up" if warmup == 0 else f"{warmup} warm-up updates")
            + f", a {rec['lr_scheduler']} learning rate, {stab['max_update']} updates of "
            f"at most {rec['max_tokens']} target tokens, dropout {rec['dropout']}"
            + (f", {rec['amp']}" if rec.get("amp", "none") != "none" else "")
            + "; seeds "
            f"{', '.join(str(s) for s in stab.get('seeds', [1]))}."
        )
        text = describe_rule(rec["divergence_threshold"], window, after, rec.get("amp", "none"))
        return {"setup": setup, "rule": {"text": text}}

    def report_datasets(self) -> list[str]:
        """The datasets of the tabled experiments, whose cleaning counts the report shows."""
        return list(dict.fromkeys(self.plan.eval_dataset(n) for n in self.plan.table_experiments()))
