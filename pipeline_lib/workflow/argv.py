"""The command line of every stage, built from the config and quoted here, never in a rule.

Each method returns the arguments of one ``python -m pipeline_lib <stage>`` call as one shell-safe
string: every value passes through :func:`shlex.quote`, so a config value can never become shell code.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from pipeline_lib.data.apply_subword import ApplySettings
from pipeline_lib.data.binarize import BinarizeSettings
from pipeline_lib.data.learn_subword import LearnSettings
from pipeline_lib.data.preprocess import PreprocessSettings
from pipeline_lib.dataclass_cli import config_argv, marked_fields
from pipeline_lib.evaluate.metric_registry import compound_split_metrics, metric_spec
from pipeline_lib.model.registry import needs_profile
from pipeline_lib.report.table_registry import instances
from pipeline_lib.train.config import recipe_fields
from pipeline_lib.workflow.experiments import expand_group_names
from pipeline_lib.workflow.plan import Plan

Pairs = Iterable[tuple[str, Any]]


def flag(name: str, value: Any) -> list[str]:
    """``--name value`` as argv words: None/False drop the flag, True is a bare switch, a list repeats values."""
    if value is None or value is False:
        return []
    if value is True:
        return [f"--{name}"]
    if isinstance(value, (list, tuple)):
        return [f"--{name}", *(str(v) for v in value)] if value else []
    return [f"--{name}", str(value)]


def flag_words(pairs: Pairs) -> list[str]:
    return [word for name, value in pairs for word in flag(name, value)]


def flags(pairs: Pairs) -> str:
    return shlex.join(flag_words(pairs))


# Recipe keys the workflow itself reads (averaging, profiling), not passed to `train`.
WORKFLOW_RECIPE_KEYS = (
    "average_last",
    "average_kind",
    "average_upper_bound",
    "profile_max_tokens",
    "profile_seed",
    "admin_closed_form",
    "admin_recursion",
)


def recipe_value(value: Any) -> Any:
    """A recipe value as its flag takes it: lists (Adam's betas) in fairseq's '(0.9, 0.98)' form."""
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(str(v) for v in value) + ")"
    return value


def recipe_pairs(recipe: dict[str, Any], fields: Iterable[str]) -> Pairs:
    """(flag, value) of every field the recipe sets, in the fields' order."""
    return [(name.replace("_", "-"), recipe_value(recipe[name])) for name in fields if name in recipe]


class Commands:
    """Arguments of each stage for one config (see :class:`Plan` for the paths)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.config = plan.config

    # ------------------------------------------------------------------ data
    def _langs(self, ds: str) -> Pairs:
        src, tgt = self.plan.dataset_langs(ds)
        return [("src", src), ("tgt", tgt)]

    def prepare_demo(self, ds: str) -> str:
        demo = self.plan.datasets[ds].get("demo", {})
        books = [
            (key.replace("_", "-"), demo[key])
            for key in ("valid_books", "test_books", "mono_books")
            if key in demo
        ]
        # An empty book list stays on the command line: it means "no such split", not "the default".
        words = [w for name, value in books for w in ([f"--{name}", *value])]
        return flags([("out-dir", self.plan.data_dir(ds, "raw")), *self._langs(ds)]) + (
            " " + shlex.join(words) if words else ""
        )

    def prepare_ding(self, ds: str) -> str:
        ding = self.plan.datasets[ds].get("ding", {})
        return flags(
            [
                ("out-dir", self.plan.data_dir(ds, "raw")),
                *self._langs(ds),
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
            *self._langs(ds),
            ("splits", ["test"] if test else ["train", "valid", "mono"]),
        ]
        tail = [("no-tokenize", d.get("subword", {}).get("kind") == "spm"), ("workers", workers)]
        return self._data_stage(PreprocessSettings, "preprocess", ds, head, tail, dropped)

    @staticmethod
    def _length_limits(p: dict[str, Any]) -> Pairs:
        """clean-corpus-n's -ratio, min and max (the stage's defaults where the config sets none)."""
        return [("ratio", p.get("ratio")), ("min-len", p.get("min_len")), ("max-len", p.get("max_len"))]

    def _data_stage(
        self, cls: type, marker: str, ds: str, head: Pairs, tail: Pairs, dropped: Iterable[str] = ()
    ) -> str:
        """A data stage's argv: ``head``, the flags of the dataset's ``marker:`` block keys that are
        fields of ``cls`` (less ``dropped``; a block may serve two stages: ``subword:`` holds
        learn-bpe's and apply-bpe's keys), ``tail``, and the block's word lists last."""
        own = set(marked_fields(cls, marker)) - set(dropped)
        block = self.plan.datasets[ds].get(marker, {})
        settings, lists = config_argv(cls, marker, {k: v for k, v in block.items() if k in own})
        return shlex.join([*flag_words(head), *settings, *flag_words(tail), *lists])

    def learn_bpe(self, ds: str, workers: int | None = None) -> str:
        head = [("in-dir", self.plan.data_dir(ds, "tok")), ("model-dir", self.plan.data_dir(ds, "subword")),
                *self._langs(ds)]  # fmt: skip
        return self._data_stage(LearnSettings, "subword", ds, head, [("workers", workers)])

    def apply_bpe(self, ds: str, workers: int | None = None, *, test: bool = False) -> str:
        suffix = "-test" if test else ""
        # fairseq's WMT'14 En-Fr cleans the segmented train and valid (clean_after: bpe); test never
        cleaned = [] if test else [sp for sp in ("train", "valid") if self.plan.cleaned_after_bpe(ds, sp)]
        limits = self._length_limits(self.plan.datasets[ds].get("preprocess", {})) if cleaned else []
        head = [
            ("in-dir", self.plan.data_dir(ds, f"tok{suffix}")),
            ("model-dir", self.plan.data_dir(ds, "subword")),
            ("out-dir", self.plan.data_dir(ds, f"bpe{suffix}")),
            *self._langs(ds),
            ("splits", ["test"] if test else ["train", "valid", "mono"]),
        ]
        tail = [("clean-splits", cleaned), *limits, ("workers", workers)]
        return self._data_stage(ApplySettings, "subword", ds, head, tail)

    def binarize(self, ds: str, workers: int | None = None) -> str:
        head = [("in-dir", self.plan.data_dir(ds, "bpe")), ("out-dir", self.plan.data_dir(ds, "bin")),
                *self._langs(ds)]  # fmt: skip
        tail = [("splits", ["train", "valid"]), ("workers", workers)]
        return self._data_stage(BinarizeSettings, "binarize", self.plan.base_dataset(ds), head, tail)

    def binarize_test(self, ds: str, workers: int | None = None) -> str:
        """The test split with the training vocabulary of ``ds`` (a back-translation mix reads its base
        dataset's test text), into bin-test/: a directory translate can read by itself."""
        return flags(
            [
                ("in-dir", self.plan.data_dir(self.plan.base_dataset(ds), "bpe-test")),
                ("out-dir", self.plan.data_dir(ds, "bin-test")),
                *self._langs(ds),
                ("vocab", f"{self.plan.data_dir(ds, 'bin')}/vocab.txt"),
                ("splits", ["test"]),
                ("workers", workers),
            ]
        )

    # ------------------------------------------------------------------ models
    def train(self, name: str, threads: int | None = None) -> str:
        """The model flags, every recipe setting the train CLI takes, and the run's own paths."""
        exp = self.plan.experiments[name]
        profiled = needs_profile(exp["residual"])
        pairs = [
            *self.plan.data_pairs(name),
            ("save-dir", self.plan.exp_dir(name)),
            *recipe_pairs(self.plan.train_recipe(name), recipe_fields()),  # max_tokens etc. for the card
            ("seed", exp.get("seed", 1)),
            ("admin-profile", self.plan.admin_profile(name) if profiled else None),
            ("num-threads", threads),
            ("progress", "lines"),
        ]
        return flags([*self.plan.model_pairs(name), *pairs])

    def profile(self, name: str, with_output: bool = True) -> str:
        """The profiling command (Plan.profile_pairs: the recipe's profile_seed replaces the run's)."""
        output = [("output", self.plan.admin_profile(name))] if with_output else []
        return flags([*self.plan.model_pairs(name), *self.plan.profile_pairs(name), *output])

    def average(self, name: str) -> str:
        rec = self.plan.recipe(name)
        exp_dir = self.plan.exp_dir(name)
        return flags(
            [
                ("save-dir", exp_dir),
                (f"num-{rec.get('average_kind', 'epoch')}-checkpoints", rec.get("average_last", 5)),
                ("checkpoint-upper-bound", rec.get("average_upper_bound")),
                ("output", self.plan.checkpoint_avg(name)),
                ("skip-if-diverged", self.plan.status_file(name)),
            ]
        )

    # ------------------------------------------------------------------ decoding
    def decoding(self, decoding: str) -> Pairs:
        """Every key of a `decoding` entry is a translate flag of the same name (SearchConfig's fields,
        --max-tokens and --seed)."""
        return [(key.replace("_", "-"), value) for key, value in self.config["decoding"][decoding].items()]

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

    def backtranslate(self, bt: str, shard: int, threads: int | None = None) -> str:
        spec = self.plan.backtranslation[bt]
        rev = spec["reverse_model"]
        outputs = {
            "text": self.plan.bt_shard_files(bt, "txt")[shard],
            "bpe": self.plan.bt_shard_files(bt)[shard],
        }
        pairs = [
            ("checkpoint", self.plan.checkpoint_avg(rev)),
            ("input", self.plan.bt_mono(bt)),
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
        spec = self.plan.backtranslation[bt]
        return flags(
            [
                ("real-dir", self.plan.data_dir(spec["dataset"], "bpe")),
                ("synthetic-src", self.plan.bt_shard_files(bt)),
                ("out-dir", self.plan.data_dir(f"bt-{bt}", "bpe")),
                *self._langs(spec["dataset"]),
                ("mono-tgt", self.plan.bt_mono(bt)),
                ("upsample-real", spec.get("upsample_real", 1)),
                ("no-tag", not spec["tagged"]),
            ]
        )

    # ------------------------------------------------------------------ evaluation
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
        base, systems, matrix = self.plan.significance[table]
        ev = self.plan.evaluation
        metric = self.plan.significance_metric(table)
        tokenized = self._tokenized_reference(base, self.plan.split) if metric_spec(metric).tokenized else []
        generate = (
            [
                ("generate", [f"{s}={self.plan.generate_file(s)}" for s in [base, *systems]]),
                ("subword", self._subword_kind(base)),
            ]
            if metric_spec(metric).generate
            else []
        )
        return flags(
            [
                *tokenized,
                *generate,
                ("ref", self.plan.reference(base)),
                ("baseline", f"{base}={self.plan.hyp_file(base)}"),
                ("n-samples", ev["bootstrap_samples"]),
                ("seed", ev["bootstrap_seed"]),
                ("alpha", ev["alpha"]),
                ("metrics", self.plan.significance_metric(table)),
                ("no-matrix", not matrix),
                ("systems", [f"{s}={self.plan.hyp_file(s)}" for s in systems]),
                ("output", self.plan.significance_file(table)),
            ]
        )

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
