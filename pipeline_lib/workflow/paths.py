"""Every file the workflow wires together, named once: the rules use these as patterns
(``P.trained`` is ``work/experiments/{exp}/trained.json``), :class:`~.plan.Plan` formats them for one
experiment or dataset. Plain strings, no imports: reading the table never loads torch.

A template starts at one of three roots, filled from the config: ``{workdir}`` (data, checkpoints),
``{results}`` (what a reader looks at) and ``{logs}``. Every other ``{name}`` is a Snakemake wildcard.
"""

from __future__ import annotations

DATA = "{workdir}/data/{ds}"
EXP = "{workdir}/experiments/{exp}"
RESULT = "{results}/experiments/{exp}"
SHARD = "{workdir}/backtranslation/{bt}/shard{shard}-of-{shards}"

# A back-translation mix is the pseudo-dataset bt-<name> (data/bt-<name>/...).
BT_PREFIX = "bt-"

# Each data stage writes one folder data/<ds>/<stage>/ and its meta.json last: the marker rules wait on.
# A name ending in _dir is a folder (a stage's --out-dir), every other one a file.
TEMPLATES: dict[str, str] = {
    "dataset_dir": DATA,  # download unpacks its archives here, beside the stage folders
    "data_dir": f"{DATA}/{{stage}}",
    "orig_mono_dir": f"{DATA}/orig_mono",  # download-mono's News Crawl archives
    "raw_splits": f"{DATA}/raw/splits.json",  # prepare-demo, prepare-ding
    "raw_download": f"{DATA}/raw/download.json",  # download (the manifest copy)
    "raw_mono": f"{DATA}/raw/mono.{{lang}}",
    "tok": f"{DATA}/tok/meta.json",
    "tok_test": f"{DATA}/tok-test/meta.json",
    "subword": f"{DATA}/subword/subword.json",
    "bpe": f"{DATA}/bpe/meta.json",
    "bpe_test": f"{DATA}/bpe-test/meta.json",
    "bpe_mono": f"{DATA}/bpe/mono.{{lang}}",  # apply-bpe segments the monolingual text beside bpe/meta.json
    "bin": f"{DATA}/bin/meta.json",
    "bin_test": f"{DATA}/bin-test/meta.json",
    "bt_mix": f"{{workdir}}/data/{BT_PREFIX}{{bt}}/bpe/meta.json",
    "bt_shard_bpe": f"{SHARD}.bpe",
    "bt_shard_text": f"{SHARD}.txt",
    "exp_dir": EXP,
    "admin_profile": f"{EXP}/admin_profile.json",
    "trained": f"{EXP}/trained.json",  # written once the run has concluded
    "status": f"{EXP}/status.json",  # the trainer's current status (not a rule output)
    "train_log": f"{EXP}/train_log.jsonl",
    "checkpoint_avg": f"{EXP}/checkpoint_avg.pt",
    "hyp": f"{RESULT}/{{split}}.hyp",
    "generate": f"{RESULT}/{{split}}.generate",
    "score": f"{RESULT}/{{split}}.score.json",
    "significance": "{results}/significance/{table}.json",
    "analysis_dir": "{results}/analysis",
    "analysis": "{results}/analysis/analysis.json",
    "word_accuracy": "{results}/analysis/word_accuracy.png",
    "length_bleu": "{results}/analysis/length_bleu.png",
    "report_spec": "{results}/report_spec.json",
    "tables": "{results}/tables.md",
    "learning_curves": "{results}/plots/learning_curves.png",
    "curves_spec": "{results}/plots/learning_curves.spec.json",
    "stability_plot": "{results}/plots/stability_map.png",
    "stability_table": "{results}/stability_map.md",
}


def fill_roots(template: str, roots: dict[str, str]) -> str:
    """The template with its root filled and every wildcard kept (str.format would demand them all)."""
    for root, value in roots.items():
        template = template.replace(f"{{{root}}}", value)
    return template


class Paths:
    """The path table for one config's roots: each template of :data:`TEMPLATES` as an attribute,
    a Snakemake pattern; :meth:`of` formats one for given wildcard values."""

    def __init__(self, workdir: str, results: str, logs: str) -> None:
        self.roots = {"workdir": workdir, "results": results, "logs": logs}
        self.patterns = {name: fill_roots(t, self.roots) for name, t in TEMPLATES.items()}

    def __getattr__(self, name: str) -> str:
        # only reached for names that are not real attributes: the table's entries
        try:
            return self.__dict__["patterns"][name]
        except KeyError:
            raise AttributeError(f"no path named {name!r} in pipeline_lib/workflow/paths.py") from None

    def of(self, name: str, **wildcards: str | int) -> str:
        """Pattern ``name`` with its wildcards filled (a missing one raises KeyError naming it)."""
        return self.patterns[name].format(**wildcards)

    def log(self, rule: str, name: str) -> str:
        """The log pattern of a job of ``rule``: ``<logs>/<rule>/<name>.log``, ``name`` made of the
        job's wildcards (each rule file's partner gives its rules' names: workflow/rules/)."""
        return f"{self.roots['logs']}/{rule}/{name}.log"
