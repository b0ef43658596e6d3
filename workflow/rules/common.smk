# Helpers of the workflow: config validation, experiment expansion, paths, input functions,
# command-line builders and resource functions. Rules in the other .smk files stay thin.
import json
import os
import re
import shlex
from pathlib import Path

import jsonschema
import yaml

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from pipeline_lib.model.config import PRESETS as ARCH_PRESETS
from pipeline_lib.report import diverged as DIV
from pipeline_lib.slurm_launch import TrainShape

SCHEMA = "../schemas/config.schema.yaml"
CONDA_ENV = "../envs/pipeline.yaml"


# ------------------------------------------------------------------------------------ validation
def _key_path(error):
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if extra:
            path = f"{path}.{extra[0]}" if path else extra[0]
    return path or "<top level>"


def config_error(key, message):
    raise WorkflowError(f"config key '{key}': {message}")


def validate_config(cfg):
    """Schema validation; on failure, one message naming the offending key."""
    try:
        validate(cfg, SCHEMA)
    except WorkflowError:
        schema_path = (
            Path(workflow.current_basedir.get_path_or_uri(secret_free=True)) / SCHEMA
        )
        schema = yaml.safe_load(schema_path.read_text())
        errors = sorted(
            jsonschema.Draft202012Validator(schema).iter_errors(cfg),
            key=lambda e: len(list(e.absolute_path)),
            reverse=True,
        )
        if not errors:
            raise
        config_error(_key_path(errors[0]), errors[0].message)


validate_config(config)
W = config["workdir"]
R = config["results"]
DATASETS = config["datasets"]
BT = config["backtranslation"]
EVAL = config["evaluation"]
SPLIT = EVAL["split"]


# ------------------------------------------------------------------------------------ experiments
def _lr_tag(lr):
    return f"{lr:g}"


def stability_experiments(spec):
    """Admin Fig. 10 grid: method x lr x depth, short runs named stability-<method>-<E>L<D>L-lr<lr>."""
    runs = {}
    for method in spec["methods"]:
        for lr in spec["lrs"]:
            for depth in spec["depths"]:
                enc, dec = (int(x) for x in depth.split("-"))
                overrides = {"lr": lr, "max_update": spec["max_update"], "max_epoch": 0}
                if "warmup_updates" in spec:
                    overrides["warmup_updates"] = spec["warmup_updates"]
                runs[f"stability-{method}-{enc}L{dec}L-lr{_lr_tag(lr)}"] = {
                    "dataset": spec["dataset"],
                    "encoder_layers": enc,
                    "decoder_layers": dec,
                    "width": spec["width"],
                    "residual": method,
                    "recipe": spec["recipe"],
                    "seed": spec.get("seed", 1),
                    "overrides": overrides,
                    "stability": {"method": method, "lr": lr, "depth": depth},
                }
    return runs


STABILITY = config.get("stability_map")
STABILITY_RUNS = stability_experiments(STABILITY) if STABILITY else {}
EXPERIMENTS = {**config["experiments"], **STABILITY_RUNS}
for _name in config["experiments"]:
    if _name in STABILITY_RUNS:
        config_error(
            f"experiments.{_name}", "name clashes with a generated stability_map run"
        )


def _check_refs():
    for name, ds in DATASETS.items():
        if ds["source"] == "download" and "recipe" not in ds:
            config_error(f"datasets.{name}.recipe", "required with source: download")
        if ds["source"] == "local" and "path" not in ds:
            config_error(f"datasets.{name}.path", "required with source: local")
        if ds["src"] == ds["tgt"]:
            config_error(f"datasets.{name}.tgt", "must differ from src")
    for name, exp in EXPERIMENTS.items():
        where = f"stability_map" if "stability" in exp else f"experiments.{name}"
        for field, table in (
            ("dataset", DATASETS),
            ("width", config["widths"]),
            ("recipe", config["recipes"]),
        ):
            if exp[field] not in table:
                config_error(
                    f"{where}.{field}",
                    f"unknown {field} {exp[field]!r} (known: {sorted(table)})",
                )
        if exp.get("decoding", "default") not in config["decoding"]:
            config_error(
                f"{where}.decoding",
                f"unknown decoding {exp.get('decoding', 'default')!r}",
            )
        bt = exp.get("backtranslation")
        if bt is not None:
            if bt not in BT:
                config_error(
                    f"{where}.backtranslation", f"unknown back-translation setup {bt!r}"
                )
            if BT[bt]["dataset"] != exp["dataset"]:
                config_error(
                    f"{where}.backtranslation",
                    f"{bt!r} is built on dataset {BT[bt]['dataset']!r}",
                )
            if exp.get("direction", "forward") != "forward":
                config_error(
                    f"{where}.direction", "back-translation trains a forward model"
                )
    for name, bt in BT.items():
        if bt["dataset"] not in DATASETS:
            config_error(
                f"backtranslation.{name}.dataset", f"unknown dataset {bt['dataset']!r}"
            )
        rev = EXPERIMENTS.get(bt["reverse_model"])
        if rev is None:
            config_error(
                f"backtranslation.{name}.reverse_model",
                f"unknown experiment {bt['reverse_model']!r}",
            )
        if (
            rev.get("direction", "forward") != "reverse"
            or rev["dataset"] != bt["dataset"]
        ):
            config_error(
                f"backtranslation.{name}.reverse_model",
                f"{bt['reverse_model']!r} must have direction: reverse and dataset: {bt['dataset']}",
            )
        if bt["decoding"] not in config["decoding"]:
            config_error(
                f"backtranslation.{name}.decoding",
                f"unknown decoding {bt['decoding']!r}",
            )
        ds = DATASETS[bt["dataset"]]
        if ds["source"] == "demo" and not ds.get("demo", {}).get("mono_books"):
            config_error(
                f"datasets.{bt['dataset']}.demo.mono_books",
                "back-translation needs monolingual books",
            )
        if ds["source"] in ("download", "ding") and "mono" not in ds:
            config_error(
                f"datasets.{bt['dataset']}.mono",
                "back-translation needs monolingual target text",
            )
    for name, rec in config["recipes"].items():
        # Averaging update checkpoints needs that many of them kept on disk.
        if rec.get("average_kind") == "update" and rec.get(
            "keep_interval_updates", 0
        ) < rec.get("average_last", 1):
            config_error(
                f"recipes.{name}.keep_interval_updates",
                f"must be >= average_last ({rec.get('average_last', 1)}) with average_kind: update",
            )
    if EVAL["decoding"] not in config["decoding"]:
        config_error("evaluation.decoding", f"unknown decoding {EVAL['decoding']!r}")
    tables = config["tables"]
    refs = []
    if "table1" in tables:
        refs += [("tables.table1.baseline", tables["table1"]["baseline"])]
        refs += [("tables.table1.rows", r) for r in tables["table1"]["rows"]]
    for i, comp in enumerate(tables.get("comparisons", [])):
        refs += [(f"tables.comparisons[{i}].rows", r) for r in comp["rows"]]
        if "baseline" in comp:
            refs += [(f"tables.comparisons[{i}].baseline", comp["baseline"])]
    if "significance" in tables:
        refs += [("tables.significance.baseline", tables["significance"]["baseline"])]
        refs += [
            ("tables.significance.systems", s)
            for s in tables["significance"]["systems"]
        ]
    refs += [("tables.analysis", s) for s in tables.get("analysis", [])]
    for key, name in refs:
        if name not in config["experiments"]:
            config_error(key, f"unknown experiment {name!r}")


_check_refs()


def exp_langs(name):
    """(source, target) of an experiment: reverse models translate tgt -> src."""
    exp = EXPERIMENTS[name]
    ds = DATASETS[exp["dataset"]]
    if exp.get("direction", "forward") == "reverse":
        return ds["tgt"], ds["src"]
    return ds["src"], ds["tgt"]


def recipe(name):
    exp = EXPERIMENTS[name]
    return {**config["recipes"][exp["recipe"]], **exp.get("overrides", {})}


def train_priority(wildcards):
    """Longest planned run first (updates x layers x d^2; an epoch counts as 1,000 updates), so that
    on a machine with few cores a long run does not start last and stretch the wall time.
    """
    exp = EXPERIMENTS[wildcards.exp]
    rec = recipe(wildcards.exp)
    width = config["widths"][exp["width"]]
    d_model = width.get("d_model") or ARCH_PRESETS[width["arch"]][0]
    updates = rec.get("max_update") or 1000 * rec.get("max_epoch", 1)
    layers = exp["encoder_layers"] + exp["decoder_layers"]
    return 1 + updates * layers * d_model**2 // 10**6


def data_key(name):
    """The binarized data an experiment trains on: its dataset, or the back-translation mix."""
    exp = EXPERIMENTS[name]
    bt = exp.get("backtranslation")
    return f"bt-{bt}" if bt else exp["dataset"]


def bt_names():
    return [n for n, e in EXPERIMENTS.items() if e.get("backtranslation")]


def plain_names():
    return [n for n, e in EXPERIMENTS.items() if not e.get("backtranslation")]


def regex(names):
    """Wildcard constraint matching exactly these names (a never-matching one when empty)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


# ------------------------------------------------------------------------------------ paths
def data_dir(ds, stage):
    return f"{W}/data/{ds}/{stage}"


def raw_marker(ds):
    """A file written last by the stage that produces the raw split files."""
    src = DATASETS[ds]["source"]
    if src in ("demo", "ding"):
        return [f"{W}/data/{ds}/raw/splits.json"]
    if src == "download":
        return [f"{W}/data/{ds}/raw/download.json"]
    d = DATASETS[ds]
    return [f"{d['path']}/train.{d['src']}", f"{d['path']}/train.{d['tgt']}"]


def preprocess_inputs(wildcards):
    ds = DATASETS[wildcards.ds]
    inputs = {"raw": raw_marker(wildcards.ds)}
    if "mono" in ds and ds["source"] != "local":
        inputs["mono"] = f"{W}/data/{wildcards.ds}/raw/mono.{ds['tgt']}"
    return inputs


def raw_dir(ds):
    d = DATASETS[ds]
    return d["path"] if d["source"] == "local" else data_dir(ds, "raw")


def exp_dir(name):
    return f"{W}/experiments/{name}"


def result(name, what):
    return f"{R}/experiments/{name}/{what}"


def dataset_langs(ds):
    if ds.startswith("bt-"):
        ds = BT[ds[3:]]["dataset"]
    return DATASETS[ds]["src"], DATASETS[ds]["tgt"]


def dataset_names(source):
    return [n for n, d in DATASETS.items() if d["source"] == source]


def bin_marker(name):
    return f"{data_dir(data_key(name), 'bin')}/meta.json"


def score_file(name):
    return result(name, f"{SPLIT}.score.json")


def hyp_file(name):
    return result(name, f"{SPLIT}.hyp")


def status_file(name):
    return f"{exp_dir(name)}/status.json"


# ------------------------------------------------------------------------------------ resources
def rule_resources(name, rule):
    """Config defaults for `rule`, overridden by experiments.<name>.resources.<rule>."""
    base = dict(config["resources"].get(rule, {}))
    base.update(EXPERIMENTS[name].get("resources", {}).get(rule, {}))
    return base


def res_fn(rule, key, default=None):
    """A resource callable for Snakemake: per-experiment value (None drops the resource)."""

    def fn(wildcards, attempt):
        value = rule_resources(wildcards.exp, rule).get(key, default)
        if key == "runtime" and value is not None:
            return value * attempt  # a retry after a time limit gets more time
        return value

    return fn


def train_launcher(wildcards, resources):
    return TrainShape.from_resources(
        {
            k: getattr(resources, k, None)
            for k in ("gpu", "nodes", "tasks_per_node", "mpi")
        }
    ).launcher()


# ------------------------------------------------------------------------------------ command lines
def _flag(name, value):
    if value is None or value is False:
        return ""
    if value is True:
        return f"--{name}"
    if isinstance(value, (list, tuple)):
        values = " ".join(shlex.quote(str(v)) for v in value)
        return f"--{name} {values}" if value else ""
    return f"--{name} {shlex.quote(str(value))}"


def flags(pairs):
    return " ".join(f for f in (_flag(k, v) for k, v in pairs) if f)


def model_pairs(name):
    exp = EXPERIMENTS[name]
    width = config["widths"][exp["width"]]
    rec = recipe(name)
    return [
        ("arch", width["arch"]),
        ("d-model", width.get("d_model")),
        ("ffn-dim", width.get("ffn_dim")),
        ("heads", width.get("heads")),
        ("encoder-layers", exp["encoder_layers"]),
        ("decoder-layers", exp["decoder_layers"]),
        ("residual", exp["residual"]),
        ("dlcl-norm", exp.get("dlcl_norm")),
        ("init", exp.get("init", "xavier")),
        ("dropout", rec.get("dropout")),
        ("attention-dropout", rec.get("attention_dropout")),
        ("activation-dropout", rec.get("activation_dropout")),
    ]


def train_flags(wildcards, threads):
    name = wildcards.exp
    src, tgt = exp_langs(name)
    rec = recipe(name)
    exp = EXPERIMENTS[name]
    betas = rec.get("adam_betas")
    admin = exp["residual"] == "admin"
    pairs = [
        ("data", data_dir(data_key(name), "bin")),
        ("source-lang", src),
        ("target-lang", tgt),
        ("save-dir", exp_dir(name)),
        ("optimizer", rec.get("optimizer")),
        ("adam-betas", f"({betas[0]}, {betas[1]})" if betas else None),
        ("adam-eps", rec.get("adam_eps")),
        ("lr", rec["lr"]),
        ("warmup-updates", rec["warmup_updates"]),
        ("warmup-init-lr", rec.get("warmup_init_lr")),
        ("clip-norm", rec.get("clip_norm")),
        ("weight-decay", rec.get("weight_decay")),
        ("label-smoothing", rec.get("label_smoothing")),
        ("max-tokens", rec["max_tokens"]),
        ("update-freq", rec.get("update_freq")),
        ("max-epoch", rec.get("max_epoch")),
        ("max-update", rec.get("max_update")),
        ("amp", rec.get("amp")),
        ("seed", exp.get("seed", 1)),
        ("log-interval", rec.get("log_interval")),
        ("keep-last-epochs", rec.get("keep_last_epochs")),
        ("save-interval-updates", rec.get("save_interval_updates")),
        ("keep-interval-updates", rec.get("keep_interval_updates")),
        ("divergence-window", rec.get("divergence_window")),
        ("divergence-threshold", rec.get("divergence_threshold")),
        ("admin-profile", f"{exp_dir(name)}/admin_profile.json" if admin else None),
        ("num-threads", threads),
        ("progress", "none"),
    ]
    return flags(model_pairs(name) + pairs)


def profile_flags(wildcards):
    name = wildcards.exp
    src, tgt = exp_langs(name)
    rec = recipe(name)
    pairs = [
        ("data", data_dir(data_key(name), "bin")),
        ("source-lang", src),
        ("target-lang", tgt),
        ("max-tokens", min(rec.get("profile_max_tokens", rec["max_tokens"]), 8192)),
        ("seed", EXPERIMENTS[name].get("seed", 1)),
        ("label-smoothing", rec.get("label_smoothing")),
        ("closed-form", bool(rec.get("admin_closed_form"))),
    ]
    return flags(model_pairs(name) + pairs)


def decoding_flags(decoding):
    d = config["decoding"][decoding]
    return flags(
        [
            ("beam", d.get("beam")),
            ("lenpen", d.get("lenpen")),
            ("max-len-a", d.get("max_len_a")),
            ("max-len-b", d.get("max_len_b")),
            ("max-tokens", d.get("max_tokens")),
            ("sampling", bool(d.get("sampling"))),
            ("sampling-topk", d.get("sampling_topk")),
            ("temperature", d.get("temperature")),
            ("seed", d.get("seed")),
        ]
    )


def exp_decoding(name):
    return EXPERIMENTS[name].get("decoding", EVAL["decoding"])


# ------------------------------------------------------------------------------------ inputs
def train_inputs(wildcards):
    name = wildcards.exp
    inputs = {"data": bin_marker(name)}
    if EXPERIMENTS[name]["residual"] == "admin":
        inputs["profile"] = f"{exp_dir(name)}/admin_profile.json"
    return inputs


def eval_dataset(name):
    return EXPERIMENTS[name]["dataset"]


def reference(name, split=None, lang=None):
    """Detokenized text of the evaluated split, target side unless ``lang``: the original text
    of the surviving pairs (preprocess writes it beside the tokenized split)."""
    lang = lang or exp_langs(name)[1]
    return f"{data_dir(eval_dataset(name), 'tok')}/{split or SPLIT}.ref.{lang}"


def ref_marker(ds):
    """preprocess's marker: it writes the <split>.ref.<lang> references with the tokenized text."""
    return f"{data_dir(ds, 'tok')}/meta.json"


def split_size(bin_meta, split):
    """Number of sentences of a split, from binarize's meta.json (for diverged placeholders)."""
    meta = json.loads(Path(bin_meta).read_text(encoding="utf-8"))
    stats = meta["splits"][split]
    return int(stats.get("pairs", stats.get("sentences", 0)))


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


# ------------------------------------------------------------------------------------ report spec
def experiment_info(name):
    exp = EXPERIMENTS[name]
    width = config["widths"][exp["width"]]
    return {
        "label": exp.get("label", name),
        "dataset": exp["dataset"],
        "encoder_layers": exp["encoder_layers"],
        "decoder_layers": exp["decoder_layers"],
        "width": width.get("label", exp["width"]),
        "d_model": width.get("d_model"),
        "residual": exp["residual"],
        "init": exp.get("init", "xavier"),
        "backtranslation": exp.get("backtranslation"),
        "seed": exp.get("seed", 1),
        "lr": recipe(name)["lr"],
        "score": score_file(name),
        "status": status_file(name),
        "train_log": f"{exp_dir(name)}/train_log.jsonl",
    }


def table_experiments():
    tables = config["tables"]
    names = []
    if "table1" in tables:
        names += [tables["table1"]["baseline"], *tables["table1"]["rows"]]
    for comp in tables.get("comparisons", []):
        names += comp["rows"] + ([comp["baseline"]] if "baseline" in comp else [])
    if "significance" in tables:
        names += [
            tables["significance"]["baseline"],
            *tables["significance"]["systems"],
        ]
    return list(dict.fromkeys(names))


def significance_sets():
    """name -> (baseline, systems, matrix?) for every significance computation the tables need."""
    tables = config["tables"]
    sets = {}
    if "table1" in tables:
        t1 = tables["table1"]
        rows = [r for r in t1["rows"] if r != t1["baseline"]]
        if rows:
            sets["table1"] = (t1["baseline"], rows, False)
    for comp in tables.get("comparisons", []):
        base = comp.get("baseline", comp["rows"][0])
        rows = [r for r in comp["rows"] if r != base]
        if rows:
            sets[comp["name"]] = (base, rows, False)
    if "significance" in tables:
        sig = tables["significance"]
        sets["table3"] = (
            sig["baseline"],
            [s for s in sig["systems"] if s != sig["baseline"]],
            True,
        )
    return sets


SIGNIFICANCE = significance_sets()


def significance_inputs(wildcards):
    base, systems, _ = SIGNIFICANCE[wildcards.table]
    return {
        "hyps": [hyp_file(n) for n in [base, *systems]],
        "data": ref_marker(eval_dataset(base)),
    }


def significance_flags(wildcards):
    base, systems, matrix = SIGNIFICANCE[wildcards.table]
    metric = (
        config["tables"].get("significance", {}).get("metric", "bleu")
        if matrix
        else "bleu"
    )
    return flags(
        [
            ("ref", reference(base)),
            ("baseline", f"{base}={hyp_file(base)}"),
            ("n-samples", EVAL["bootstrap_samples"]),
            ("seed", EVAL["bootstrap_seed"]),
            ("alpha", EVAL["alpha"]),
            ("metrics", metric),
            ("no-matrix", not matrix),
            ("systems", [f"{s}={hyp_file(s)}" for s in systems]),
        ]
    )


def analysis_systems():
    tables = config["tables"]
    if "analysis" in tables:
        return tables["analysis"]
    return tables["table1"]["rows"] if "table1" in tables else []


def report_spec():
    tables = config["tables"]
    names = table_experiments()
    spec = {
        "split": SPLIT,
        "experiments": {n: experiment_info(n) for n in names},
        "tables": tables,
        "significance": {t: f"{R}/significance/{t}.json" for t in SIGNIFICANCE},
        "alpha": EVAL["alpha"],
    }
    if STABILITY:
        spec["stability"] = {
            "runs": {
                n: {**e["stability"], "status": status_file(n)}
                for n, e in STABILITY_RUNS.items()
            },
            "methods": STABILITY["methods"],
            "lrs": STABILITY["lrs"],
            "depths": STABILITY["depths"],
            "max_update": STABILITY["max_update"],
        }
    return spec


def all_targets():
    targets = [f"{R}/tables.md", f"{R}/plots/learning_curves.png"]
    targets += [score_file(n) for n in config["experiments"]]
    if analysis_systems():
        targets.append(f"{R}/analysis/analysis.json")
    if STABILITY:
        targets.append(f"{R}/plots/stability_map.png")
    return targets


# ------------------------------------------------------------------------------------ data flags
def demo_book_flags(ds):
    demo = DATASETS[ds].get("demo", {})
    parts = []
    for key in ("valid_books", "test_books", "mono_books"):
        if key in demo:
            books = " ".join(shlex.quote(b) for b in demo[key])
            parts.append(f"--{key.replace('_', '-')} {books}")
    return " ".join(parts)


def ding_flags(ds):
    d = DATASETS[ds]
    ding = d.get("ding", {})
    return flags(
        [
            ("src", d["src"]),
            ("tgt", d["tgt"]),
            ("valid-size", ding.get("valid_size")),
            ("test-size", ding.get("test_size")),
            ("seed", ding.get("seed")),
        ]
    )


def preprocess_flags(ds):
    d = DATASETS[ds]
    p = d.get("preprocess", {})
    return flags(
        [
            ("src", d["src"]),
            ("tgt", d["tgt"]),
            ("ratio", p.get("ratio")),
            ("min-len", p.get("min_len")),
            ("max-len", p.get("max_len")),
            ("valid-every", p.get("valid_every")),
            ("dedup", bool(p.get("dedup"))),
            ("no-tokenize", d.get("subword", {}).get("kind") == "spm"),
        ]
    )


def learn_bpe_flags(ds):
    d = DATASETS[ds]
    s = d.get("subword", {})
    return flags(
        [
            ("src", d["src"]),
            ("tgt", d["tgt"]),
            ("kind", s.get("kind")),
            ("merges", s.get("merges")),
            ("min-frequency", s.get("min_frequency")),
            ("vocab-size", s.get("vocab_size")),
        ]
    )


def apply_bpe_flags(ds):
    d = DATASETS[ds]
    return flags(
        [
            ("src", d["src"]),
            ("tgt", d["tgt"]),
            ("vocab-threshold", d.get("subword", {}).get("vocab_threshold")),
        ]
    )


def binarize_flags(ds):
    src, tgt = dataset_langs(ds)
    base = BT[ds[3:]]["dataset"] if ds.startswith("bt-") else ds
    b = DATASETS[base].get("binarize", {})
    return flags(
        [
            ("src", src),
            ("tgt", tgt),
            ("threshold", b.get("threshold")),
            ("nwords", b.get("nwords")),
            ("splits", ["train", "valid", "test"]),
        ]
    )


# ------------------------------------------------------------------------------------ back-translation
def bt_translate_inputs(wildcards):
    bt = BT[wildcards.bt]
    rev = bt["reverse_model"]
    return {
        "checkpoint": f"{exp_dir(rev)}/checkpoint_avg.pt",
        "status": status_file(rev),
        "bpe": f"{data_dir(bt['dataset'], 'bpe')}/meta.json",
    }


def bt_mono(bt):
    """Subword-segmented monolingual target text (written by apply_bpe next to its meta.json)."""
    spec = BT[bt]
    _, tgt = dataset_langs(spec["dataset"])
    return f"{data_dir(spec['dataset'], 'bpe')}/mono.{tgt}"


def bt_mix_flags(bt):
    spec = BT[bt]
    src, tgt = dataset_langs(spec["dataset"])
    return flags(
        [
            ("src", src),
            ("tgt", tgt),
            ("mono-tgt", bt_mono(bt)),
            ("upsample-real", spec.get("upsample_real", 1)),
            ("no-tag", not spec.get("tagged", True)),
        ]
    )


# ------------------------------------------------------------------------------------ evaluation flags
def score_flags(wildcards):
    name = wildcards.exp
    _, tgt = exp_langs(name)
    ds = DATASETS[eval_dataset(name)]
    moses = ds.get("subword", {}).get("kind", "bpe") == "bpe"
    return flags(
        [
            ("ref", reference(name, wildcards.split)),
            ("system", name),
            (
                "ref-tok",
                (
                    f"{data_dir(eval_dataset(name), 'tok')}/{wildcards.split}.{tgt}"
                    if moses
                    else None
                ),
            ),
            ("moses-lang", tgt),
            ("compound-split", bool(ds.get("compound_split"))),
            ("metrics", EVAL.get("metrics")),
        ]
    )


def analysis_inputs(wildcards):
    systems = analysis_systems()
    ds = eval_dataset(systems[0])
    return {
        "hyps": [hyp_file(n) for n in systems],
        "data": [*raw_marker(ds), ref_marker(ds)],
    }


def analysis_flags(wildcards):
    systems = analysis_systems()
    ds = eval_dataset(systems[0])
    src, tgt = exp_langs(systems[0])
    return flags(
        [
            ("ref", reference(systems[0])),
            ("src", reference(systems[0], lang=src)),
            ("train-target", f"{raw_dir(ds)}/train.{tgt}"),
            ("systems", [f"{n}={hyp_file(n)}" for n in systems]),
        ]
    )
