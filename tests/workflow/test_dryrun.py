"""The Snakemake workflow's DAG, config validation and lint, without running any stage.

`snakemake -n` on the demo, the tiny CI and both paper-scale configs must build the full DAG; the
expected number of jobs per rule is derived here from each config independently of common.smk.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")


def run_snakemake(args: list[str], cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(cwd), *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


def job_stats(output: str) -> Counter:
    """Parse the dry run's 'Job stats' table into {rule: count}."""
    m = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal\s+(\d+)", output, re.S)
    assert m, output[-3000:]
    stats = Counter()
    for line in m.group(1).splitlines():
        rule, count = line.split()
        stats[rule] = int(count)
    assert sum(stats.values()) == int(m.group(2))
    return stats


def listed_runs(cfg: dict) -> dict[str, dict]:
    """The config's experiments, a seed group (seeds: [...]) as one run per seed (<name>-s<seed>)."""
    return {
        n if s is None else f"{n}-s{s}": e
        for n, e in cfg["experiments"].items()
        for s in e.get("seeds", [None])
    }


def profile_jobs(cfg: dict, exps: dict[str, dict], stab: dict | None) -> int:
    """One profile per Admin run; runs whose recipe has profile_seed share one per model, data and
    profiling settings (Transformer-Clinic iwslt14_de-en.md:75-106 profiles once at seed 1111)."""
    per_run, shared = 0, set()
    settings = ("dropout", "attention_dropout", "activation_dropout", "label_smoothing", "max_tokens")
    runs = [
        (
            e["recipe"],
            e.get("overrides", {}),
            e["dataset"],
            e["width"],
            e["encoder_layers"],
            e["decoder_layers"],
        )
        for e in exps.values()
        if e["residual"] == "admin"
    ]
    if stab:
        n_cells = len(stab["lrs"]) * len(stab.get("betas2", [0])) * len(stab.get("seeds", [1]))
        for depth in stab["depths"] if "admin" in stab["methods"] else []:
            enc, dec = (int(x) for x in depth.split("-"))
            runs += [(stab["recipe"], {}, stab["dataset"], stab["width"], enc, dec)] * n_cells
    for recipe, overrides, *model in runs:
        rec = {**cfg["recipes"][recipe], **overrides}
        if "profile_seed" in rec:
            shared.add((*model, rec["profile_seed"], *(rec.get(k) for k in settings)))
        else:
            per_run += 1
    return per_run + len(shared)


def expected_counts(cfg: dict) -> Counter:
    # a seed group trains, averages, translates and scores one run per seed
    exps = listed_runs(cfg)
    groups = {n for n, e in cfg["experiments"].items() if "seeds" in e}
    datasets = cfg["datasets"]
    stab = cfg.get("stability_map")
    stab_runs = []
    if stab:
        cells = [(m, lr, d) for m in stab["methods"] for lr in stab["lrs"] for d in stab["depths"]]
        stab_runs = cells * len(stab.get("betas2", [0])) * len(stab.get("seeds", [1]))
    decoded = len(stab_runs) if stab and stab.get("decode", False) else 0
    tables = cfg["tables"]
    n_sig = 0
    # a seed group's row (mean ± std) is not bootstrapped: a table needs a single-run baseline and row
    for t in [tables.get("table1"), *tables.get("comparisons", [])]:
        base = t and t.get("baseline", t["rows"][0])
        n_sig += bool(t) and base not in groups and any(r not in groups | {base} for r in t["rows"])
    n_sig += "significance" in tables
    used_bt = {e["backtranslation"] for e in exps.values() if e.get("backtranslation")}
    real = [d for d in datasets.values()]
    split = cfg.get("evaluation", {}).get("split", "test")
    tested = {e["dataset"] for e in exps.values()} if split == "test" else set()
    counts = Counter(
        {
            "prepare_demo": sum(d["source"] == "demo" for d in real),
            "prepare_ding": sum(d["source"] == "ding" for d in real),
            "download": sum(d["source"] == "download" for d in real),
            "monolingual": sum(isinstance(d.get("mono"), str) and d["source"] != "local" for d in real),
            "download_mono": sum(isinstance(d.get("mono"), dict) for d in real),
            "preprocess": len(real),
            "learn_bpe": len(real),
            "apply_bpe": len(real),
            "binarize": len(real) + len(used_bt),
            # the test split apart: per evaluated dataset, and binarized once per vocabulary it is read with
            "preprocess_test": len(tested),
            "apply_bpe_test": len(tested),
            "binarize_test": len({e.get("backtranslation") or e["dataset"] for e in exps.values()}),
            "translate_backtranslation": sum(
                cfg.get("backtranslation", {})[bt].get("shards", 1) for bt in used_bt
            ),
            "bt_mix": len(used_bt),
            "profile_admin": profile_jobs(cfg, exps, stab),
            "train": sum(not e.get("backtranslation") for e in exps.values()) + len(stab_runs),
            "train_backtranslation": sum(bool(e.get("backtranslation")) for e in exps.values()),
            # a decoded grid (Admin Figure 10) averages, translates and scores every run
            "average": len(exps) + decoded,
            "translate": len(exps) + decoded,
            "score": len(exps) + decoded,
            "significance": n_sig,
            "analyze": int(bool(tables.get("analysis", tables.get("table1", {}).get("rows")))),
            "report_spec": 1,
            "report": 1,
            "curves_spec": 1,
            "learning_curves": 1,
            "stability_map": int(bool(stab)),
            "all": 1,
        }
    )
    return +counts  # drop zeros


CONFIGS = [
    "config.yaml",
    "config.demo_bt.yaml",
    "config.stability_methods.yaml",
    "tests/fixtures/config.tiny.yaml",
]
PAPER_CONFIGS = [
    "config.wmt14_en_fr.yaml",
    "config.wmt14_en_de.yaml",
    "config.iwslt14_fig10.yaml",
    "config.wmt14_en_de_dlcl_lipschitz.yaml",
]
# per config: a training job and the SLURM shape it must carry
JOB_SHAPES = {
    "config.wmt14_en_fr.yaml": (
        "enfr_60L12L_default",
        r"gpu=16, nodes=2, tasks_per_node=8, mpi=srun, [^\n]*runtime=10080",
    ),
    "config.wmt14_en_de.yaml": (
        "ende_60L12L_default",
        r"gpu=16, nodes=2, tasks_per_node=8, mpi=srun, [^\n]*runtime=10080",
    ),
    "config.iwslt14_fig10.yaml": (
        "stability-post_ln-6L6L-lr0.0005-b0.999-s1111",
        r"gpu=1, [^\n]*runtime=720",
    ),
    "config.wmt14_en_de_dlcl_lipschitz.yaml": ("xu_lip_24L", r"gpu=2, [^\n]*runtime=4320"),
}


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_paper_config_dry_run_as_typed(config: str):
    """The command of docs/paper-scale.md, exactly as a user types it in the repo root: the paper
    config replaces the demo default, so its DAG holds every job of the paper and nothing of the demo."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["snakemake", "-n", "all", "--configfile", config],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cfg = yaml.safe_load((REPO / config).read_text())
    assert job_stats(proc.stdout) == expected_counts(cfg)
    demo = yaml.safe_load((REPO / "config.yaml").read_text())
    for name in [*demo["datasets"], *demo["experiments"]]:
        assert f"={name}" not in proc.stdout and f"/{name}/" not in proc.stdout, name
    # Training jobs carry the per-experiment job shape from the config.
    exp, shape = JOB_SHAPES[config]
    assert re.search(rf"rule train:\n[^\n]*\n(?:\s+\S.*\n)*?\s+wildcards: exp={exp}\n(?:\s+\S.*\n)*?\s+resources: [^\n]*{shape}",
                     proc.stdout), proc.stdout[:4000]  # fmt: skip


@pytest.mark.parametrize("config", CONFIGS)
def test_dry_run_builds_the_full_dag(config: str, tmp_path: Path):
    cfg = yaml.safe_load((REPO / config).read_text())
    for ds in cfg["datasets"].values():  # files a user provides must exist for the DAG
        if ds["source"] == "local":
            ds["path"] = str(REPO / ds["path"])
        if isinstance(ds.get("mono"), str):
            mono = tmp_path / ds["mono"]
            mono.parent.mkdir(parents=True, exist_ok=True)
            mono.write_text("une phrase\n")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run_snakemake(["-n", "--configfile", "config.yaml"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = job_stats(proc.stdout)
    assert stats == expected_counts(cfg)
    if config == "config.yaml":
        # Longest planned training first (updates x layers x d^2): the demo's 1,400-update 2L-2L-256D
        # run, then the 800-update 6L-6L stability-map runs (9,600 layer-updates each), then the
        # 500-update 12L-6L runs (9,000) and the 6L-6L ones; Admin profiling takes its training's rank.
        prio = train_priorities(proc.stdout)
        ranked = sorted(prio, key=prio.get, reverse=True)
        assert ranked[0] == "demo_2L2L_preln_wide", prio
        stability = [r for r in ranked if r.startswith("stability-")]
        assert len(stability) == 24 and set(ranked[1:25]) == set(stability), prio
        assert set(ranked[25:28]) == {"demo_12L6L_postln", "demo_12L6L_admin", "demo_12L6L_preln"}, prio
        assert min(prio[r] for r in ranked[25:28]) > prio["demo_6L6L_postln"], prio
        profile = rf"rule profile_admin:\n[^\n]*\n(?:\s+\S.*\n)*?\s+wildcards: exp=demo_12L6L_admin\n\s+priority: {prio['demo_12L6L_admin']}\n"
        assert re.search(profile, proc.stdout), proc.stdout[:4000]


def train_priorities(dry_run: str) -> dict[str, int]:
    """{experiment: priority} of the train jobs in a dry run's job listing."""
    out = {}
    for job in re.finditer(r"^rule train:\n((?:[ \t]+.*\n?)*)", dry_run, re.M):
        exp = re.search(r"wildcards: exp=(\S+)", job.group(1)).group(1)
        prio = re.search(r"priority: (\d+)", job.group(1))
        out[exp] = int(prio.group(1)) if prio else 0
    return out


def _write(tmp_path: Path, mutate) -> Path:
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    mutate(cfg)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (
            lambda c: c["experiments"]["demo_6L6L_admin"].update(encoder_layer=6),
            "experiments.demo_6L6L_admin.encoder_layer",
        ),
        (lambda c: c["recipes"]["demo"].update(lr=-1), "recipes.demo.lr"),
        (lambda c: c["tables"]["table1"]["rows"].append("no_such_model"), "tables.table1.rows"),
        (
            lambda c: c["experiments"]["demo_6L6L_admin"].update(width="huge"),
            "experiments.demo_6L6L_admin.width",
        ),
        (lambda c: c.update(stability_maps={}), "stability_maps"),
        (
            lambda c: c["recipes"]["demo"].update(keep_interval_updates=1, average_last=3),
            "recipes.demo.keep_interval_updates",
        ),
        (
            lambda c: c["recipes"]["demo"].update(divergence_threshold="unigramm"),
            "recipes.demo.divergence_threshold",
        ),
    ],
)
def test_config_error_names_the_key(tmp_path: Path, mutate, key: str):
    bad = _write(tmp_path, mutate)
    proc = run_snakemake(["-n", "--configfile", str(bad)], tmp_path)
    assert proc.returncode != 0
    assert f"config key '{key}'" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-2000:]


def test_snakemake_lint_is_clean():
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [SNAKEMAKE, "--lint"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr


def test_snakefmt_check():
    snakefmt = shutil.which("snakefmt", path=str(BIN))
    assert snakefmt is not None, "snakefmt is a dev dependency (pip install -e '.[dev]')"
    proc = subprocess.run(
        [snakefmt, "--check", "Snakefile", "workflow/rules"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("config", PAPER_CONFIGS)
def test_plan_summary_adds_up_the_configured_gpu_hours(config: str):
    """`python -m pipeline_lib plan` (the plan tables of docs/paper-scale.md): jobs per rule are the dry
    run's, and the training GPU-hours equal gpu x runtime summed over the config's experiments."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "plan", "--configfile", config],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[1].strip("*").isdigit():
            rows[cells[0].strip("*")] = (
                int(cells[1].strip("*")),
                float(cells[3].strip("*").replace(",", "")),
            )
    cfg = yaml.safe_load((REPO / config).read_text())
    expected = expected_counts(cfg)
    for rule, (jobs, _) in rows.items():
        if rule != "total":
            assert jobs == expected[rule], rule
    default = cfg["resources"]["train"]
    gpu_hours = 0.0
    for exp in listed_runs(cfg).values():
        res = {**default, **exp.get("resources", {}).get("train", {})}
        gpu_hours += res["gpu"] * res["runtime"] / 60
    stab = cfg.get("stability_map")
    if stab:  # generated runs take the default train resources
        runs = len(stab["methods"]) * len(stab["lrs"]) * len(stab["depths"])
        runs *= len(stab.get("betas2", [0])) * len(stab.get("seeds", [1]))
        gpu_hours += runs * default["gpu"] * default["runtime"] / 60
    trained = rows["train"][1] + rows.get("train_backtranslation", (0, 0.0))[1]
    assert trained == pytest.approx(gpu_hours, abs=1)
    # every experiment states its effective batch and the memory it needs per GPU
    batch_rows = {
        cells[0]: cells
        for line in proc.stdout.splitlines()
        if len(cells := [c.strip() for c in line.strip("|").split("|")]) == 6
    }
    for name in listed_runs(cfg):
        memory = batch_rows[name][5]
        assert memory.endswith(" GB") and 0.01 < float(memory[:-3]) < 80, (name, memory)


def test_readme_own_data_example_builds_its_dag(tmp_path: Path):
    """The "Your own data" config of docs/own-data.md, as printed there, with the files it names."""
    doc = (REPO / "docs" / "own-data.md").read_text()
    marker = "# my_ende.yaml"
    block = marker + doc.split("```yaml\n" + marker, 1)[1].split("```", 1)[0]
    cfg = yaml.safe_load(block)
    (tmp_path / "my_ende.yaml").write_text(block)
    data = tmp_path / cfg["datasets"]["my_ende"]["path"]
    data.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (data / f"{split}.{lang}").write_text("a sentence\n")
    proc = run_snakemake(["-n", "all", "--configfile", "my_ende.yaml"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = job_stats(proc.stdout)
    assert stats == expected_counts(cfg) and stats["train"] == 2
