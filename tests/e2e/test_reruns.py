"""The daily loop through the real Snakefile: a config or data edit reruns exactly the jobs whose output
it changes; a training whose settings changed starts afresh (the old run set aside); a Ctrl-C'd
training stays visible as preempted and resumes, whether the terminal's Ctrl-C or a signal to
Snakemake alone stopped it.

One tiny local corpus, two 1L-1L experiments with their own decodings; each edit is checked with a
dry run against the finished workflow, and the lr edit is also run for real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from workflow_run import REPO, snakemake, snakemake_command

pytestmark = pytest.mark.slow

TINY = REPO / "tests" / "fixtures" / "workflow_tiny"


def _config(corpus: Path) -> dict:
    return {
        "workdir": "work",
        "results": "results",
        "threads": {"data": 1, "train": 1, "translate": 1},
        "datasets": {
            "tiny": {
                "source": "local", "path": str(corpus), "src": "en", "tgt": "fr",
                "subword": {"kind": "bpe", "merges": 200},
            }
        },
        "widths": {"tiny": {"arch": "base", "d_model": 32, "ffn_dim": 64, "heads": 2}},
        "recipes": {
            "tiny": {
                "optimizer": "adam", "lr": 0.002, "warmup_updates": 5, "max_tokens": 2000, "max_epoch": 1,
                "dropout": 0.0, "average_last": 1, "log_interval": 1,
            }
        },
        "decoding": {
            "narrow": {"beam": 2, "lenpen": 1.0, "max_len_a": 1.2, "max_len_b": 10},
            "wide": {"beam": 3, "lenpen": 1.0, "max_len_a": 1.2, "max_len_b": 10},
        },
        "experiments": {
            "a": {"dataset": "tiny", "encoder_layers": 1, "decoder_layers": 1, "width": "tiny",
                  "residual": "post_ln", "recipe": "tiny", "decoding": "narrow"},
            "b": {"dataset": "tiny", "encoder_layers": 1, "decoder_layers": 1, "width": "tiny",
                  "residual": "pre_ln", "recipe": "tiny", "decoding": "wide"},
        },
        "evaluation": {"split": "test", "decoding": "narrow", "bootstrap_samples": 50, "metrics": ["bleu"]},
        "tables": {"table1": {"title": "T1", "baseline": "a", "rows": ["b"]}},
    }  # fmt: skip


def _write(work: Path, cfg: dict) -> None:
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def planned(work: Path, *args: str) -> Counter[tuple[str, str]]:
    """(rule, experiment or dataset) of every job a dry run of ``all`` plans."""
    proc = snakemake(work, "-n", "all", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    jobs: Counter[tuple[str, str]] = Counter()
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not head:
            continue
        wild = re.search(r"wildcards: (.*)", block)
        key = ""
        if wild:
            pairs = dict(p.split("=", 1) for p in wild.group(1).split(", "))
            key = pairs.get("exp") or pairs.get("ds") or pairs.get("table") or ""
        jobs[(head.group(1), key)] += 1
    return jobs


def rules_of(jobs: Counter[tuple[str, str]]) -> set[str]:
    return {rule for rule, _ in jobs}


REPORTING = {"report", "report_spec", "curves_spec", "learning_curves", "significance", "analyze", "all"}


def _touch_later(path: Path, than: Path) -> None:
    stamp = than.stat().st_mtime + 5
    os.utime(path, (stamp, stamp))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    work = tmp_path_factory.mktemp("reruns")
    corpus = work / "corpus"
    shutil.copytree(TINY, corpus)
    cfg = _config(corpus)
    _write(work, cfg)
    proc = snakemake(work, "all")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(snakemake(work, "-n", "all"))
    return work, cfg


def test_raw_text_through_translate_and_the_ctranslate2_export_gives_the_workflows_hypotheses(
    finished, tmp_path: Path
):
    work, cfg = finished
    # experiment a's decoding entry (beam 2, length 1.2*src+10), read from work/config.yaml as typed
    search = ["--decoding", "a"]
    checkpoint = "work/experiments/a/checkpoint_avg.pt"
    raw = Path(cfg["datasets"]["tiny"]["path"]) / "test.en"
    workflow = (work / "results/experiments/a/test.hyp").read_text().splitlines()
    python = [sys.executable, "-m", "pipeline_lib"]

    run = subprocess.run([*python, "translate", "--checkpoint", checkpoint, "--raw-input", str(raw),
                          "--output", str(tmp_path / "raw.hyp"), *search], cwd=work, capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "raw.hyp").read_text().splitlines() == workflow

    ct2 = tmp_path / "ct2"
    run = subprocess.run([*python, "export", "--checkpoint", checkpoint, "--format", "ctranslate2",
                          "--out", str(ct2), *search], cwd=work, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    # the export's own script, run elsewhere (it imports nothing from pipeline_lib)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, str(ct2 / "translate.py"), "--input", str(raw)],
                         cwd=tmp_path, capture_output=True, text=True, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    # every line, those that reached the length limit too (the script rescores CTranslate2's beam
    # with the </s> the workflow's search forces there)
    assert run.stdout.splitlines() == workflow


def _dry_run_text(work: Path, cfg: dict, edit) -> list[str]:
    new = json.loads(json.dumps(cfg))
    edit(new)
    _write(work, new)
    try:
        proc = snakemake(work, "-n", "all")
        return (proc.stdout + proc.stderr).splitlines()
    finally:
        _write(work, cfg)


def _edited(work: Path, cfg: dict, edit) -> Counter[tuple[str, str]]:
    new = json.loads(json.dumps(cfg))
    edit(new)
    _write(work, new)
    try:
        return planned(work)
    finally:
        _write(work, cfg)


def test_changing_one_decoding_reruns_only_its_experiments_evaluation(finished):
    work, cfg = finished
    jobs = _edited(work, cfg, lambda c: c["decoding"]["wide"].update(beam=4))
    assert rules_of(jobs) - REPORTING == {"translate", "score"}, jobs
    assert jobs[("translate", "b")] == 1 and jobs[("score", "b")] == 1
    assert ("translate", "a") not in jobs
    assert "learning_curves" not in rules_of(jobs)  # it reads training logs only
    # the report spec's reason names its digest; the spec (about 10 kB on a paper grid) is not printed
    text = "\n".join(_dry_run_text(work, cfg, lambda c: c["decoding"]["wide"].update(beam=4)))
    [block] = [
        b for b in re.split(r"\n(?=(?:local)?rule \w+:)", text) if re.match(r"(local)?rule report_spec:", b)
    ]
    [reason] = [line for line in block.splitlines() if line.strip().startswith("reason:")]
    assert "Params have changed" in reason and len(reason) < 300, reason


def test_changing_one_experiments_lr_reruns_its_training_onward(finished):
    work, cfg = finished
    jobs = _edited(work, cfg, lambda c: c["experiments"]["a"].update(overrides={"lr": 0.003}))
    assert rules_of(jobs) - REPORTING == {"train", "average", "translate", "score"}, jobs
    assert {k for r, k in jobs if r in ("train", "translate")} == {"a"}


def test_changing_bpe_merges_reruns_from_learn_bpe(finished):
    work, cfg = finished
    jobs = _edited(work, cfg, lambda c: c["datasets"]["tiny"]["subword"].update(merges=150))
    assert "learn_bpe" in rules_of(jobs) and "binarize" in rules_of(jobs), jobs
    assert not {"preprocess", "preprocess_test"} & rules_of(jobs), jobs
    assert jobs[("train", "a")] == 1 and jobs[("train", "b")] == 1


@pytest.mark.parametrize("name", ["test.fr", "test.en"])
def test_editing_a_test_file_never_retrains(finished, name):
    work, _ = finished
    path = work / "corpus" / name
    original = path.read_bytes()
    marker = work / "work/data/tiny/tok-test/meta.json"
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        lines[3] = lines[3].replace(" ", "  ", 1)
        path.write_text("".join(lines), encoding="utf-8")
        _touch_later(path, marker)
        jobs = planned(work)
    finally:
        path.write_bytes(original)
        os.utime(path, (marker.stat().st_mtime - 5,) * 2)
    # The test split is preprocessed as one aligned pair of files (its source and reference side by
    # side, as translate's generate output shows them), so either side's edit re-decodes; nothing trains.
    assert ("preprocess_test", "tiny") in jobs and ("score", "a") in jobs, jobs
    assert not {"train", "average", "preprocess", "learn_bpe", "binarize"} & rules_of(jobs), jobs
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(snakemake(work, "-n", "all"))


def test_a_changed_training_starts_afresh_and_sets_the_old_run_aside(finished):
    work, cfg = finished
    exp = work / "work/experiments/a"
    old_identity = json.loads((exp / "run_identity.json").read_text())
    new = json.loads(json.dumps(cfg))
    new["experiments"]["a"]["overrides"] = {"lr": 0.003}
    _write(work, new)
    try:
        proc = snakemake(work, "all")
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
        archives = list((exp / "superseded").iterdir())
        assert len(archives) == 1 and archives[0].name.endswith(old_identity["id"])
        assert (archives[0] / "checkpoint_last.pt").is_file() and (archives[0] / "status.json").is_file()
        kinds = [json.loads(line)["kind"] for line in (exp / "train_log.jsonl").read_text().splitlines()]
        assert kinds[0] == "start" and "resume" not in kinds, kinds
        identity = json.loads((exp / "run_identity.json").read_text())
        assert identity["train"]["lr"] == 0.003 and identity["id"] != old_identity["id"]
        log = (work / "results/logs/train/a.log").read_text()
        assert "previous run moved to" in log and "train.lr" in log
        assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(snakemake(work, "-n", "all"))
    finally:
        _write(work, cfg)


def _stage_processes(tag: Path) -> list[str]:
    """Command lines of live processes that name ``tag`` (the run directory): a stage left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and str(tag) in cmdline and "pipeline_lib" in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


# How a run gets stopped: a terminal's Ctrl-C (the whole process group), `kill -INT <pid>` and
# `kill <pid>` (SIGTERM, as a batch system or a process manager sends) to Snakemake alone.
# Snakemake as a terminal starts it, SIGINT at its default: a test process may have inherited SIGINT
# ignored (`/usr/bin/time` ignores it in what it runs; so does a background job of a script), and an
# ignored SIGINT stays ignored across exec, in Snakemake and its jobs alike (the relay leaves it so).
AS_FROM_A_TERMINAL = [sys.executable, "-c",
                      "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.argv[1], sys.argv[1:])"]  # fmt: skip

STOPS = {
    "ctrl_c_group": lambda pid: os.killpg(pid, signal.SIGINT),
    "sigint_snakemake": lambda pid: os.kill(pid, signal.SIGINT),
    "sigterm_snakemake": lambda pid: os.kill(pid, signal.SIGTERM),
}


@pytest.mark.parametrize("stop", STOPS)
def test_a_stopped_run_ends_promptly_preempted_and_resumes(tmp_path: Path, stop: str):
    corpus = tmp_path / "corpus"
    shutil.copytree(TINY, corpus)
    cfg = _config(corpus)
    cfg["recipes"]["tiny"].update(max_epoch=0, max_update=400)
    cfg["experiments"] = {"a": cfg["experiments"]["a"]}
    cfg["tables"] = {"comparisons": [{"name": "only", "title": "T", "rows": ["a"]}]}
    _write(tmp_path, cfg)
    exp = tmp_path / "work/experiments/a"
    cmd, env = snakemake_command(tmp_path, "all")
    with (tmp_path / "first.log").open("w") as out:
        proc = subprocess.Popen([*AS_FROM_A_TERMINAL, *cmd], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        log = exp / "train_log.jsonl"
        while not (log.is_file() and log.read_text().count('"kind": "train"') >= 20):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()[
                -3000:
            ]
            time.sleep(0.05)
        STOPS[stop](proc.pid)
        sent = time.monotonic()
        proc.wait(timeout=120)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    printed = (tmp_path / "first.log").read_text()
    assert took < 30, f"Snakemake took {took:.0f} s to stop\n{printed[-3000:]}"
    trained = (exp / "status.json").read_text() if (exp / "status.json").is_file() else "no status.json"
    assert proc.returncode != 0, f"exit 0 {took:.1f} s after the stop; status: {trained}\n{printed[-4000:]}"
    assert not _stage_processes(tmp_path), _stage_processes(tmp_path)
    status = json.loads((exp / "status.json").read_text())
    assert status["status"] == "preempted", status
    assert (exp / "checkpoint_last.pt").is_file() and not (exp / "trained.json").exists()
    stopped_at = status["update"]
    assert 0 < stopped_at < 400
    assert "exit status 75" in printed, printed[-3000:]

    again = snakemake(tmp_path, "work/experiments/a/trained.json")  # the rest is tested above
    assert again.returncode == 0, (again.stdout + again.stderr)[-6000:]
    assert "Forced execution" not in again.stdout + again.stderr
    assert json.loads((exp / "trained.json").read_text())["status"] == "completed"
    kinds = [json.loads(line) for line in (exp / "train_log.jsonl").read_text().splitlines()]
    resumes = [k for k in kinds if k["kind"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["update"] == stopped_at
    assert not (exp / "superseded").exists()
    train_log = (tmp_path / "results/logs/train/a.log").read_text()
    assert "preempted" in train_log and "resuming from" in train_log  # appended, not overwritten
