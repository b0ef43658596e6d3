"""A validated config resolved into what the rules need: experiments, recipes, paths, priorities,
significance sets, the report spec and the final targets. Pure functions of the config."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline_lib.model.config import PRESETS as ARCH_PRESETS
from pipeline_lib.model.config import model_recipe_pairs
from pipeline_lib.model.memory_estimate import Recipe as MemoryRecipe
from pipeline_lib.model.memory_estimate import Shape, estimate_training_memory
from pipeline_lib.model.registry import needs_profile
from pipeline_lib.report.table_registry import instances
from pipeline_lib.workflow.card_shape import Card, JobShape, job_resources, shape_for_card, token_cap
from pipeline_lib.workflow.crossref import check_references
from pipeline_lib.workflow.experiments import all_experiments, expand_group_names, seed_groups
from pipeline_lib.workflow.paths import BT_PREFIX, Paths
from pipeline_lib.workflow.smoke import apply_smoke


def regex(names: Iterable[str]) -> str:
    """Wildcard constraint matching exactly these names (a never-matching one when empty)."""
    names = list(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


def local_files(d: dict[str, Any], test: bool = False) -> list[str]:
    """The raw files of a local dataset that one preprocess job reads: train.<src>/<tgt> (required)
    and every valid/mono file that exists, or, with ``test``, the test files."""
    if test:
        return [f"{d['path']}/test.{lang}" for lang in (d["src"], d["tgt"])]
    files = [f"{d['path']}/train.{d['src']}", f"{d['path']}/train.{d['tgt']}"]
    optional = [f"{d['path']}/{split}.{lang}" for split in ("valid", "mono") for lang in (d["src"], d["tgt"])]
    return files + [f for f in optional if Path(f).is_file()]


class Plan:
    """The workflow's view of one config (already schema-validated, defaults filled)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config = apply_smoke(config)
        self.workdir: str = config["workdir"]
        self.results: str = config["results"]
        self.logs: str = config.get("logs") or f"{self.results}/logs"
        self.paths = Paths(self.workdir, self.results, self.logs)
        self.datasets: dict[str, dict[str, Any]] = config["datasets"]
        self.backtranslation: dict[str, dict[str, Any]] = config["backtranslation"]
        self.evaluation: dict[str, Any] = config["evaluation"]
        self.split: str = self.evaluation["split"]
        self.stability: dict[str, Any] | None = config.get("stability_map")
        self.experiments, self.stability_runs = all_experiments(config)
        self.seed_groups = seed_groups(config["experiments"])  # a table row naming one: mean over its runs
        check_references(config, self.experiments)
        self.significance = self._significance_sets()
        self.card = Card.from_config(config.get("card"))  # None: every job keeps the authors' shape
        self._shapes: dict[str, JobShape | None] = {}

    # ------------------------------------------------------------------ experiments
    def exp_langs(self, name: str) -> tuple[str, str]:
        """(source, target) of an experiment: reverse models translate tgt -> src."""
        exp = self.experiments[name]
        ds = self.datasets[exp["dataset"]]
        if exp.get("direction", "forward") == "reverse":
            return ds["tgt"], ds["src"]
        return ds["src"], ds["tgt"]

    def recipe(self, name: str) -> dict[str, Any]:
        exp = self.experiments[name]
        return {**self.config["recipes"][exp["recipe"]], **exp.get("overrides", {})}

    def width(self, name: str) -> dict[str, Any]:
        return self.config["widths"][self.experiments[name]["width"]]

    def train_priority(self, name: str) -> int:
        """Longest planned run first (updates x layers x d^2; an epoch counts as 1,000 updates), so that
        on a machine with few cores a long run does not start last and stretch the wall time. A
        back-translation's reverse model goes before the runs that wait for its translations."""
        waiting = [
            n
            for n, e in self.experiments.items()
            if e.get("backtranslation")
            and self.backtranslation[e["backtranslation"]]["reverse_model"] == name
        ]
        own = self._planned_cost(name)
        return max([own, *(self._planned_cost(n) + 1 for n in waiting)])

    def dims(self, name: str) -> tuple[int, int, int]:
        """(d_model, ffn_dim, heads) of an experiment: its width's values, else its arch preset's."""
        width = self.width(name)
        d_model, ffn_dim, heads = ARCH_PRESETS[width["arch"]]
        return width.get("d_model") or d_model, width.get("ffn_dim") or ffn_dim, width.get("heads") or heads

    def _planned_cost(self, name: str) -> int:
        exp = self.experiments[name]
        rec = self.recipe(name)
        d_model = self.dims(name)[0]
        updates = rec.get("max_update") or 1000 * rec.get("max_epoch", 1)
        layers = exp["encoder_layers"] + exp["decoder_layers"]
        return 1 + updates * layers * d_model**2 // 10**6

    def data_key(self, name: str) -> str:
        """The binarized data an experiment trains on: its dataset, or the back-translation mix."""
        bt = self.experiments[name].get("backtranslation")
        return f"{BT_PREFIX}{bt}" if bt else self.experiments[name]["dataset"]

    def bt_names(self) -> list[str]:
        return [n for n, e in self.experiments.items() if e.get("backtranslation")]

    def plain_names(self) -> list[str]:
        return [n for n, e in self.experiments.items() if not e.get("backtranslation")]

    def profiled_names(self) -> list[str]:
        """Experiments whose residual variant trains from a profile (Admin)."""
        return [n for n, e in self.experiments.items() if needs_profile(e["residual"])]

    def needs_profile(self, name: str) -> bool:
        return needs_profile(self.experiments[name]["residual"])

    def decoding_of(self, name: str) -> str:
        return self.experiments[name].get("decoding", self.evaluation["decoding"])

    def configured_resources(self, name: str, rule: str) -> dict[str, Any]:
        """Config defaults for `rule`, overridden by experiments.<name>.resources.<rule>."""
        base = dict(self.config["resources"].get(rule, {}))
        base.update(self.experiments[name].get("resources", {}).get(rule, {}))
        return base

    def resources(self, name: str, rule: str) -> dict[str, Any]:
        """What a job of `rule` requests: the configured resources, with a training job's GPUs, nodes
        and launcher following the card's shape (:meth:`train_shape`) when the config names a card,
        and its runtime scaled by the authors' GPUs over the card's, so that fewer GPUs get as many
        GPU-hours as the configured job, up to the longest runtime the config requests for any
        training (a partition's time limit: a run that needs longer resumes on the next attempt)."""
        base = self.configured_resources(name, rule)
        shape = self.train_shape(name) if rule == "train" else None
        if shape is not None:
            assert self.card is not None
            base.update(job_resources(shape, self.card.gpus_per_node))
            if base.get("runtime"):
                scaled = -(-base["runtime"] * self.authors_shape(name).gpus // shape.gpus)
                longest = max(
                    self.configured_resources(n, "train").get("runtime") or 0 for n in self.experiments
                )
                base["runtime"] = min(scaled, max(longest, base["runtime"]))
        return base

    # ------------------------------------------------------------------ the training job's shape
    def authors_shape(self, name: str) -> JobShape:
        """(GPUs, max_tokens, update_freq) as the recipe and resources state them; a CPU job is one worker."""
        recipe = self.recipe(name)
        gpus = int(self.configured_resources(name, "train").get("gpu") or 0)
        return JobShape(max(gpus, 1), int(recipe["max_tokens"]), int(recipe.get("update_freq", 1)))

    def train_shape(self, name: str) -> JobShape | None:
        """The job shape for the config's card (card_shape.py), None without a card or for a CPU job.
        Its tokens per update are the authors' shape's, exactly."""
        if self.card is None or not int(self.configured_resources(name, "train").get("gpu") or 0):
            return None
        if name not in self._shapes:
            authors = self.authors_shape(name)
            cap = token_cap(
                lambda tokens: self.memory_estimate_gb(name, tokens, update_freq=2), self.card.usable_gb
            )
            shape = shape_for_card(authors.tokens_per_update, authors.gpus, cap, self.card.gpus_per_node)
            self._shapes[name] = shape
        return self._shapes[name]

    def train_recipe(self, name: str) -> dict[str, Any]:
        """The recipe the train job runs: the card's max_tokens and update_freq in place of the authors'."""
        shape = self.train_shape(name)
        recipe = self.recipe(name)
        return (
            recipe
            if shape is None
            else {**recipe, "max_tokens": shape.max_tokens, "update_freq": shape.update_freq}
        )

    def vocab_size(self, name: str) -> int:
        """The BPE merge count or the SentencePiece size (the joint vocabulary is within a few hundred
        types of it): what the memory and cost estimates take before the data is binarized."""
        subword = self.datasets[self.experiments[name]["dataset"]].get("subword", {})
        return int(subword.get("merges") or subword.get("vocab_size") or 32000)

    def memory_estimate_gb(self, name: str, tokens: int, update_freq: int) -> float:
        """Peak training memory per GPU (``pipeline_lib.model.memory_estimate``) with ``tokens`` per GPU
        under the recipe's dropouts, ``amp`` and activation checkpointing, with CUDA's fused attention;
        the vocabulary taken as the BPE merge count or the SentencePiece size (the joint vocabulary is
        within a few hundred types of it). ``update_freq`` > 1 keeps the fp32 gradients through the
        forward pass (the card's search assumes it: the bound holds for either)."""
        exp, recipe = self.experiments[name], self.recipe(name)
        shape = Shape(
            exp["encoder_layers"],
            exp["decoder_layers"],
            *self.dims(name),
            vocab=self.vocab_size(name),
            residual=exp.get("residual", "post_ln"),
        )
        # ModelConfig's and TrainConfig's defaults (tests/model/test_memory_estimate.py)
        default = MemoryRecipe()
        training = MemoryRecipe(
            dropout=recipe.get("dropout", default.dropout),
            attention_dropout=recipe.get("attention_dropout", default.attention_dropout),
            activation_dropout=recipe.get("activation_dropout", default.activation_dropout),
            amp=recipe.get("amp", default.amp),
        )
        checkpointing = bool(recipe.get("checkpoint_activations"))
        estimate = estimate_training_memory(
            shape, tokens, training, checkpointing=checkpointing, update_freq=update_freq
        )
        return estimate.total_gb

    # ------------------------------------------------------------------ datasets
    def dataset_names(self, source: str) -> list[str]:
        return [n for n, d in self.datasets.items() if d["source"] == source]

    def mono_dataset_names(self, kind: str) -> list[str]:
        """Datasets whose monolingual text a rule brings in: ``copy`` (a local file; a local
        dataset's stays where it is) or ``download`` (a News Crawl recipe)."""
        names = []
        for n, d in self.datasets.items():
            mono = d.get("mono")
            if mono is None or (d["source"] == "local" and isinstance(mono, str)):
                continue
            if (kind == "download") == isinstance(mono, dict):
                names.append(n)
        return names

    def base_dataset(self, ds: str) -> str:
        """The real dataset behind ``ds`` (a back-translation mix bt-<name> is built on one)."""
        bt = ds.removeprefix(BT_PREFIX)
        return self.backtranslation[bt]["dataset"] if bt != ds else ds

    def dataset_langs(self, ds: str) -> tuple[str, str]:
        d = self.datasets[self.base_dataset(ds)]
        return d["src"], d["tgt"]

    # ------------------------------------------------------------------ paths (see paths.py)
    def data_dir(self, ds: str, stage: str) -> str:
        return self.paths.of("data_dir", ds=ds, stage=stage)

    def raw_dir(self, ds: str) -> str:
        d = self.datasets[ds]
        return d["path"] if d["source"] == "local" else self.data_dir(ds, "raw")

    def raw_marker(self, ds: str, test: bool = False) -> list[str]:
        """The raw split files, as rule inputs: the marker written last by the stage that produces
        them, or, for a local dataset, the files of it that this preprocess job reads (training side
        or test split), so that editing a test file reruns evaluation only."""
        d = self.datasets[ds]
        if d["source"] in ("demo", "ding"):
            return [self.paths.of("raw_splits", ds=ds)]
        if d["source"] == "download":
            return [self.paths.of("raw_download", ds=ds)]
        return local_files(d, test)

    def mono_raw(self, ds: str) -> str | None:
        d = self.datasets[ds]
        if "mono" not in d or (d["source"] == "local" and isinstance(d["mono"], str)):
            return None
        return self.paths.of("raw_mono", ds=ds, lang=d["tgt"])

    def exp_dir(self, name: str) -> str:
        return self.paths.of("exp_dir", exp=name)

    def bin_dir(self, name: str) -> str:
        return self.data_dir(self.data_key(name), "bin")

    def bin_marker(self, name: str) -> str:
        return self.paths.of("bin", ds=self.data_key(name))

    def eval_bin_dir(self, name: str, split: str) -> str:
        """Where translate reads ``split``: the test split has a directory of its own (bin-test/)."""
        return self.data_dir(self.data_key(name), "bin-test") if split == "test" else self.bin_dir(name)

    def eval_bin_marker(self, name: str, split: str) -> str:
        return self.paths.of("bin_test" if split == "test" else "bin", ds=self.data_key(name))

    def tok_dir(self, ds: str, split: str) -> str:
        """Tokenized text of ``split``: test is preprocessed apart from the training side (tok-test/)."""
        return self.data_dir(ds, "tok-test" if split == "test" else "tok")

    def tok_marker(self, ds: str, split: str) -> str:
        return self.paths.of("tok_test" if split == "test" else "tok", ds=ds)

    # ------------------------------------------------------------------ what a model is (as flags)
    def model_pairs(self, name: str) -> list[tuple[str, Any]]:
        """The model's flags, as `train` and `profile` take them: width, depths, layout, and the
        recipe's model settings (dropouts, ...)."""
        exp = self.experiments[name]
        width = self.width(name)
        return [
            ("arch", width["arch"]),
            ("d-model", width.get("d_model")),
            ("ffn-dim", width.get("ffn_dim")),
            ("heads", width.get("heads")),
            ("encoder-layers", exp["encoder_layers"]),
            ("decoder-layers", exp["decoder_layers"]),
            ("residual", exp["residual"]),
            ("decoder-residual", exp.get("decoder_residual")),
            ("dlcl-norm", exp.get("dlcl_norm")),
            ("init", exp.get("init", "xavier")),
            *model_recipe_pairs(self.recipe(name)),
        ]

    def data_pairs(self, name: str) -> list[tuple[str, Any]]:
        src, tgt = self.exp_langs(name)
        return [("data", self.bin_dir(name)), ("source-lang", src), ("target-lang", tgt)]

    def profile_pairs(self, name: str) -> list[tuple[str, Any]]:
        """The profiling run's own flags; the recipe's profile_seed (shared profiles) replaces the
        run's seed."""
        rec = self.recipe(name)
        seed = rec.get("profile_seed", self.experiments[name].get("seed", 1))
        return [
            *self.data_pairs(name),
            ("max-tokens", min(rec.get("profile_max_tokens", rec["max_tokens"]), 8192)),
            ("seed", seed),
            ("label-smoothing", rec.get("label_smoothing")),
            ("closed-form", bool(rec.get("admin_closed_form"))),
            ("recursion", None if rec.get("admin_closed_form") else rec.get("admin_recursion", "reference")),
        ]

    def admin_profile(self, name: str) -> str:
        """The profile ``name`` trains from: its own, or its profile owner's (:meth:`profile_owner`)."""
        return self.paths.of("admin_profile", exp=self.profile_owner(name))

    def profile_owner(self, name: str) -> str:
        """The experiment whose profiling run ``name`` uses. Without the recipe's ``profile_seed``,
        ``name`` itself (a profile per seed); with it, the first profiled experiment (config order)
        whose profiling flags (:meth:`model_pairs`, :meth:`profile_pairs`), at that seed, are the same:
        Transformer-Clinic profiles once with seed 1111 and trains every seed from that profile
        (nmt-experiments/iwslt14_de-en.md:75-88)."""
        owners = self.__dict__.get("_profile_owners")
        if owners is None:
            first: dict[str, str] = {}
            owners = {}
            for n in self.profiled_names():
                if self.recipe(n).get("profile_seed") is None:
                    owners[n] = n
                else:
                    # repr-exact: 1 and 1.0 are different flag values, as on the command line
                    key = json.dumps([*self.model_pairs(n), *self.profile_pairs(n)], default=str)
                    owners[n] = first.setdefault(key, n)
            self._profile_owners = owners
        return owners.get(name, name)

    def profile_owners(self) -> list[str]:
        """The experiments whose profile_admin job runs (one per distinct profiling command)."""
        return sorted({self.profile_owner(n) for n in self.profiled_names()})

    def status_file(self, name: str) -> str:
        """The run's current status (completed | diverged | preempted), as the trainer writes it."""
        return self.paths.of("status", exp=name)

    def train_log(self, name: str) -> str:
        return self.paths.of("train_log", exp=name)

    def trained_marker(self, name: str) -> str:
        """The train rule's output: written once the run has concluded (never for a preempted one)."""
        return self.paths.of("trained", exp=name)

    def checkpoint_avg(self, name: str) -> str:
        return self.paths.of("checkpoint_avg", exp=name)

    def score_file(self, name: str, split: str | None = None) -> str:
        return self.paths.of("score", exp=name, split=split or self.split)

    def hyp_file(self, name: str, split: str | None = None) -> str:
        return self.paths.of("hyp", exp=name, split=split or self.split)

    def generate_file(self, name: str, split: str | None = None) -> str:
        return self.paths.of("generate", exp=name, split=split or self.split)

    def eval_dataset(self, name: str) -> str:
        return self.experiments[name]["dataset"]

    def reference(self, name: str, split: str | None = None, lang: str | None = None) -> str:
        """Detokenized text of the evaluated split, target side unless ``lang``: the original text
        of the surviving pairs (preprocess writes it beside the tokenized split; apply-bpe a copy
        filtered like the split when it cleans it)."""
        lang = lang or self.exp_langs(name)[1]
        split = split or self.split
        return f"{self.eval_text_dir(self.eval_dataset(name), split)}/{split}.ref.{lang}"

    def cleaned_after_bpe(self, ds: str, split: str) -> bool:
        """Whether apply-bpe, not preprocess, length/ratio-cleans ``split`` of ``ds`` (``clean_after: bpe``)."""
        p = self.datasets[ds].get("preprocess", {})
        after_bpe = p.get("clean_after", "tokenize") == "bpe"
        return after_bpe and split in p.get("clean_splits", ["train", "valid"])

    def eval_text_dir(self, ds: str, split: str) -> str:
        """Where the references of ``split`` lie, line-aligned with what translate reads: tok/ (or
        tok-test/), or bpe/ when apply-bpe cleans the split (it filters them as ``{split}.ref.<lang>``
        and the tokenized text as ``{split}.tok.<lang>``)."""
        return posixpath.dirname(self.ref_marker(ds, split))  # a stage's marker is <its folder>/meta.json

    def tokenized_reference(self, ds: str, split: str, lang: str) -> str:
        """The Moses-tokenized reference of ``split`` (tokenized BLEU), aligned like :meth:`reference`."""
        name = f"{split}.tok.{lang}" if self.cleaned_after_bpe(ds, split) else f"{split}.{lang}"
        return f"{self.eval_text_dir(ds, split)}/{name}"

    def bpe_marker(self, ds: str) -> str:
        return self.paths.of("bpe", ds=ds)

    def bpe_test_marker(self, ds: str) -> str:
        """The segmented test split ``ds`` is evaluated on (a back-translation mix: its base dataset's)."""
        return self.paths.of("bpe_test", ds=self.base_dataset(ds))

    def ref_marker(self, ds: str, split: str | None = None) -> str:
        """The marker of the stage that writes the <split>.ref.<lang> references with the tokenized text
        (preprocess; apply-bpe for a split it cleans), and records how that text was tokenized."""
        split = split or self.split
        return self.bpe_marker(ds) if self.cleaned_after_bpe(ds, split) else self.tok_marker(ds, split)

    def significance_file(self, table: str) -> str:
        return self.paths.of("significance", table=table)

    # ------------------------------------------------------------------ tables and report
    def table_experiments(self) -> list[str]:
        """The runs the tables read (a seed group: each of its runs)."""
        return expand_group_names(self.table_names(), self.seed_groups)

    def table_names(self) -> list[str]:
        """The experiments and seed groups the tables name."""
        names = [n for table in instances(self.config["tables"], tabled=True) for n in table.names()]
        return list(dict.fromkeys(names))

    def _significance_sets(self) -> dict[str, tuple[str, list[str], bool]]:
        """name -> (baseline, systems, matrix?) for every significance computation the tables need."""
        sets = {}
        for table in instances(self.config["tables"]):
            tested = table.kind.tested(table.table, self.seed_groups) if table.kind.tested else None
            if tested is not None:
                sets[table.name] = tested
        return sets

    def analysis_systems(self) -> list[str]:
        tables = self.config["tables"]
        if "analysis" in tables:
            return tables["analysis"]
        if "table1" not in tables:
            return []
        # the baseline first: the plots compare each system with it; a seed group by its first run
        rows = [tables["table1"]["baseline"], *tables["table1"]["rows"]]
        return list(dict.fromkeys(self.seed_groups.get(n, [n])[0] for n in rows))

    def stability_scores(self) -> list[str]:
        """The grid runs' score files when the map is decoded (Admin Figure 10 shows BLEU per cell)."""
        if not (self.stability and self.stability.get("decode")):
            return []
        return [self.score_file(n) for n in self.stability_runs]

    def all_targets(self) -> list[str]:
        targets = [self.paths.tables, self.paths.learning_curves]
        targets += [self.score_file(n) for n in self.experiments if n not in self.stability_runs]
        if self.analysis_systems():
            targets.append(self.paths.analysis)
        if self.stability:
            targets += self.stability_scores()
            targets.append(self.paths.stability_plot)
        return targets
