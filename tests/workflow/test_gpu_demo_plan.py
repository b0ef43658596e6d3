"""`make demo-gpu` plans what issue 56 asks for: Snakemake's own dry run of the Makefile's command line
(config.gpu_demo.yaml, profiles/local with one card's GPU slots), read job by job.

Depth study: base width, 6L-6L against 18L-6L and 36L-6L with post-LN / pre-LN / Admin, RAdam with
warm-up and the authors' fp16 mode; the Figure 10 grid: RAdam, the linear schedule, no warm-up, the
configured lr x beta2 cells for each method, every cell decoded; the tables with significance."""

from __future__ import annotations

import re
import shlex
import subprocess
from itertools import product
from pathlib import Path

import pytest
import yaml
from workflow_run import REPO, user_command

GPU_DEMO = yaml.safe_load((REPO / "config.gpu_demo.yaml").read_text())
# The paper configs' fp16 recipe (fairseq --fp16 with the authors' loss-scale window and floor).
PAPER_RECIPE = yaml.safe_load((REPO / "config.wmt14_en_fr.yaml").read_text())["recipes"]["enfr"]


def make_demo_gpu_line(*make_args: str) -> list[str]:
    """The snakemake command `make demo-gpu` runs (make -n), as a list of words."""
    out = subprocess.run(
        ["make", "-n", "-s", "demo-gpu", *make_args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    line = next(x for x in out.splitlines() if "snakemake " in x)
    return shlex.split(line.split("&&", 1)[1])


def dry_run(words: list[str], tmp: Path) -> list[dict]:
    """Run ``words`` (a snakemake command line) as a dry run in ``tmp``: the planned jobs, each a dict
    of rule, wildcards, resources, output and shell command."""
    assert words[:3] == ["snakemake", "--profile", "local"], words
    cmd, env = user_command(tmp, " ".join([*words, "-n"]))
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    jobs: list[dict] = []
    for line in proc.stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            jobs.append({"rule": m.group(1), "wildcards": {}, "resources": {}, "output": "", "shell": ""})
        elif jobs and line.startswith("    wildcards: "):
            jobs[-1]["wildcards"] = dict(kv.split("=", 1) for kv in line[15:].split(", "))
        elif jobs and line.startswith("    resources: "):
            jobs[-1]["resources"] = dict(kv.split("=", 1) for kv in line[15:].split(", "))
        elif jobs and line.startswith("    output: "):
            jobs[-1]["output"] = line[12:]
        elif jobs and line.startswith("Shell command: "):
            jobs[-1]["shell"] = line[15:]
    assert jobs, proc.stdout[-3000:]
    return jobs


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return dry_run(make_demo_gpu_line(), tmp_path_factory.mktemp("gpu-demo-plan"))


def by_rule(jobs: list[dict], rule: str) -> dict[str, dict]:
    return {
        j["wildcards"].get("exp", j["wildcards"].get("table", j["output"])): j
        for j in jobs
        if j["rule"] == rule
    }


def flag(shell: str, name: str) -> str:
    words = shlex.split(shell.split(";", 1)[1])
    return words[words.index(name) + 1]


DEPTHS = {"6L6L": ("6", "6"), "18L6L": ("18", "6"), "36L6L": ("36", "6")}
METHODS = {"postln": "post_ln", "preln": "pre_ln", "admin": "admin"}


def test_depth_study_is_base_width_at_three_depths_with_the_papers_recipe(planned: list[dict]):
    train = by_rule(planned, "train")
    depth = {name: job for name, job in train.items() if not name.startswith("stability-")}
    # every depth with post-LN and Admin; pre-LN at the shallowest and deepest (18L-6L pre-LN: the budget)
    expected = {f"gd_{d}_{m}" for d, m in product(DEPTHS, METHODS)} - {"gd_18L6L_preln"}
    assert set(depth) == expected
    for name, job in depth.items():
        d, m = name.split("_")[1:]
        shell = job["shell"]
        assert (flag(shell, "--encoder-layers"), flag(shell, "--decoder-layers")) == DEPTHS[d]
        assert flag(shell, "--residual") == METHODS[m]
        assert flag(shell, "--arch") == "base" and "--d-model" not in shell  # 512 / 2048 / 8 heads
        assert flag(shell, "--optimizer") == "radam" and int(flag(shell, "--warmup-updates")) > 1
        assert flag(shell, "--amp") == PAPER_RECIPE["amp"] == "fairseq_fp16"
        assert int(flag(shell, "--fp16-scale-window")) == PAPER_RECIPE["fp16_scale_window"]
        assert float(flag(shell, "--threshold-loss-scale")) == PAPER_RECIPE["threshold_loss_scale"]


def test_figure10_grid_is_radam_linear_no_warmup_every_cell_decoded(planned: list[dict]):
    spec = GPU_DEMO["stability_map"]
    train = by_rule(planned, "train")
    grid = {name: job for name, job in train.items() if name.startswith("stability-")}
    cells = set(product(spec["methods"], spec["lrs"], spec["betas2"]))
    assert len(cells) >= 12 and len(spec["lrs"]) >= 2 and len(spec["betas2"]) >= 2
    seen = set()
    for job in grid.values():
        shell = job["shell"]
        assert flag(shell, "--optimizer") == "radam" and flag(shell, "--lr-scheduler") == "linear"
        assert flag(shell, "--warmup-updates") == "1"  # 1e-7 at update 1, then the peak: no warm-up
        assert flag(shell, "--max-update") == str(spec["max_update"])
        beta2 = float(flag(shell, "--adam-betas").strip("()").split(",")[1])
        seen.add((flag(shell, "--residual"), float(flag(shell, "--lr")), beta2))
    assert seen == cells
    # the figure plots BLEU per cell: every grid run is averaged, decoded and scored
    for rule in ("average", "translate", "score"):
        assert set(grid) <= set(by_rule(planned, rule)), rule
    # Admin: one profile per depth-study model, one shared by the grid's cells (profile_seed)
    admin = {n for n in train if "admin" in n}
    profiles = by_rule(planned, "profile_admin")
    assert len(profiles) == 1 + len({n for n in admin if not n.startswith("stability-")})


def test_every_model_is_decoded_and_the_tables_have_significance(planned: list[dict]):
    train = set(by_rule(planned, "train"))
    assert set(by_rule(planned, "translate")) == train == set(by_rule(planned, "score"))
    tables = GPU_DEMO["tables"]
    names = {"table1", "table3", *(c["name"] for c in tables["comparisons"])}
    assert set(by_rule(planned, "significance")) == names
    outputs = " ".join(j["output"] for j in planned if j["rule"] in ("report", "stability_map"))
    results = GPU_DEMO["results"]
    for path in ("tables.md", "stability_map.md", "plots/stability_map.png"):
        assert f"{results}/{path}" in outputs, (path, outputs)


def test_gpu_jobs_each_hold_one_of_the_cards_slots(planned: list[dict]):
    gpu_rules = ("train", "translate", "profile_admin")
    jobs = [j for j in planned if j["rule"] in gpu_rules]
    assert jobs and {j["resources"].get("gpu") for j in jobs} == {"1"}
    cpu = [j for j in planned if j["rule"] in ("score", "significance", "binarize")]
    assert cpu and all("gpu" not in j["resources"] or j["resources"]["gpu"] == "0" for j in cpu)
    words = make_demo_gpu_line("GPU_JOBS=2", "GPU_DEMO_CONFIG=config.gpu_demo.yaml config.gpu_demo_24gb.yaml")
    resources = words[words.index("--resources") + 1 : words.index("--set-resources")]
    assert "gpu=2" in resources
    configfiles = words[words.index("--configfile") + 1 :]
    assert configfiles == ["config.gpu_demo.yaml", "config.gpu_demo_24gb.yaml"]


def test_a_24gb_card_splits_only_the_36_layer_models_batches(planned: list[dict], tmp_path: Path):
    words = make_demo_gpu_line("GPU_JOBS=2", "GPU_DEMO_CONFIG=config.gpu_demo.yaml config.gpu_demo_24gb.yaml")
    small = by_rule(dry_run(words, tmp_path), "train")
    big = by_rule(planned, "train")
    assert set(small) == set(big)
    split = set()
    for name, job in small.items():
        tokens = int(flag(job["shell"], "--max-tokens")) * int(flag(job["shell"], "--update-freq"))
        base = big[name]["shell"]
        assert tokens == int(flag(base, "--max-tokens")) * int(flag(base, "--update-freq"))  # same recipe
        if flag(job["shell"], "--update-freq") != flag(base, "--update-freq"):
            split.add(name)
    assert split == {n for n in big if n.startswith("gd_36L6L_")}
