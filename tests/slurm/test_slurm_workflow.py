"""The real workflow (Snakefile) through Snakemake's SLURM executor on the local one-node cluster,
with a test copy of profiles/slurm.

1. A reduced tiny end-to-end run (data -> BPE -> binarize -> Admin profiling -> training ->
   averaging -> decoding -> scores -> significance -> analysis -> tables): every job but the
   workflow's `localrules` (all, report_spec, curves_spec) is an sbatch job, and results/tables.md is produced.
   tests/e2e/test_workflow.py runs the full tiny config locally; through SLURM it takes ~6 minutes
   on 2 CPUs, so back-translation and the stability map are left out here.
2. Preemption: a training job is sent SIGTERM with `scancel --signal=TERM` mid-run; the trainer
   saves checkpoint_last.pt and exits 75, the SLURM job fails, Snakemake retries it (the profile's
   `retries`), the retry resumes from checkpoint_last.pt, and the final weights equal those of an
   identical uninterrupted run trained alongside it.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import torch
import yaml
from slurm_helpers import make_test_profile
from workflow_run import snakemake, snakemake_command, write_config

from pipeline_lib.checkpoint import LAST, load_checkpoint

SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
RULE_BLOCK = re.compile(r"^(localrule|rule) (\w+):$", re.M)


def _reduce_tiny(cfg: dict) -> None:
    """Two experiments (post-LN and Admin) and the tables over them; no back-translation/stability map."""
    keep = ("base_2L2L", "admin_2L2L")
    cfg["experiments"] = {k: cfg["experiments"][k] for k in keep}
    cfg.pop("backtranslation", None)
    cfg.pop("stability_map", None)
    tables = cfg["tables"]
    tables["table1"]["rows"] = ["admin_2L2L"]
    tables["comparisons"] = [c for c in tables["comparisons"] if c["name"] == "residual"]
    tables["comparisons"][0]["rows"] = list(keep)
    tables["significance"]["systems"] = list(keep)


def test_tiny_workflow_through_slurm(tmp_path: Path, slurm_cluster):
    work = tmp_path / "run"
    write_config(work, _reduce_tiny)
    profile = make_test_profile(tmp_path / "profile", slurm_cluster.partition)
    t0 = time.monotonic()
    proc = snakemake(work, "all", profile=profile, cores=None, timeout=540)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    print(f"workflow through SLURM: {time.monotonic() - t0:.0f} s")

    tables = (work / "results" / "tables.md").read_text()
    assert "## Table 1: tiny En-Fr (test)" in tables and "2L-2L-32D Admin" in tables

    # Every non-local job went through sbatch: one SLURM job id per `rule` block, each with its log.
    blocks = RULE_BLOCK.findall(log)
    remote = [name for kind, name in blocks if kind == "rule"]
    local = sorted(name for kind, name in blocks if kind == "localrule")
    assert local == ["all", "curves_spec", "report_spec"], local  # the Snakefile's `localrules`
    submitted = SUBMITTED.findall(log)
    job_ids = [jid for _, jid, _ in submitted]
    assert len(remote) == len(submitted) == len(set(job_ids)), (remote, submitted)
    for _, jid, slurm_log in submitted:
        assert Path(slurm_log).name == f"{jid}.log" and Path(slurm_log).is_file(), slurm_log
    rules_by_log = sorted(Path(p).relative_to(work / ".snakemake/slurm_logs").parts[0] for *_, p in submitted)
    assert rules_by_log == sorted(f"rule_{r}" for r in remote)
    for rule in ("preprocess", "learn_bpe", "binarize", "profile_admin", "train", "average", "translate",
                 "score", "significance", "analyze", "report"):  # fmt: skip
        assert rule in remote, rule
    print(
        f"{len(submitted)} sbatch jobs ({min(map(int, job_ids))}..{max(map(int, job_ids))}), local: {local}"
    )


# ----------------------------------------------------------------------------------- preemption
MAX_UPDATE = 300
SIGNAL_AFTER = 30  # updates of the first attempt before scancel


def _preemption_config(cfg: dict) -> None:
    """Two identical 1L-1L runs of MAX_UPDATE updates (small batches: ~65 updates per epoch)."""
    cfg["recipes"] = {
        "long": {
            "optimizer": "radam", "adam_betas": [0.9, 0.98], "lr": 0.002, "warmup_updates": 10,
            "max_tokens": 400, "max_epoch": 0, "max_update": MAX_UPDATE, "dropout": 0.1,
            "label_smoothing": 0.1, "log_interval": 1,
        }
    }  # fmt: skip
    exp = {"dataset": "tiny", "encoder_layers": 1, "decoder_layers": 1, "width": "tiny",
           "residual": "post_ln", "recipe": "long"}  # fmt: skip
    cfg["experiments"] = {"preempted": dict(exp), "reference": dict(exp)}
    cfg.pop("backtranslation", None)
    cfg.pop("stability_map", None)
    cfg["tables"] = {"table1": {"title": "unused", "baseline": "reference", "rows": ["preempted"]}}


def _train_updates(train_log: Path) -> int:
    if not train_log.is_file():
        return 0
    return sum(1 for line in train_log.read_text().splitlines() if '"kind": "train"' in line)


def _slurm_job_of(comment: str) -> str | None:
    out = subprocess.run(["squeue", "-h", "-o", "%i %k %T"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        jid, job_comment, state = line.split()
        if job_comment == comment and state == "RUNNING":
            return jid
    return None


def test_preempted_training_is_retried_and_resumes_exactly(tmp_path: Path, slurm_cluster):
    work = tmp_path / "run"
    write_config(work, _preemption_config)
    # The data stages run locally (the test above sends them through SLURM); training goes to SLURM.
    prep = snakemake(work, "work/data/tiny/bin/meta.json", timeout=300)
    assert prep.returncode == 0, (prep.stdout + prep.stderr)[-4000:]

    profile = make_test_profile(tmp_path / "profile", slurm_cluster.partition, keep_retries=True)
    retries = yaml.safe_load((profile / "config.yaml").read_text())["retries"]
    assert retries >= 1, "profiles/slurm must retry training jobs"
    exps = work / "work" / "experiments"
    cmd, env = snakemake_command(
        work,
        "work/experiments/preempted/trained.json",
        "work/experiments/reference/trained.json",
        profile=profile,
        cores=None,
    )
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        # Wait until the first attempt is well into training, then signal its SLURM job.
        first_job = None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if _train_updates(exps / "preempted" / "train_log.jsonl") >= SIGNAL_AFTER:
                first_job = _slurm_job_of("rule_train_wildcards_preempted")
                if first_job is not None:
                    break
            time.sleep(0.1)
        if first_job is None:
            proc.kill()
            raise AssertionError("training never got going under SLURM:\n" + proc.communicate()[0][-5000:])
        subprocess.run(["scancel", "--signal=TERM", first_job], check=True)
        signalled_at = _train_updates(exps / "preempted" / "train_log.jsonl")
        log, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log[-6000:]
    assert signalled_at < MAX_UPDATE, "the run finished before the signal: make it longer"

    # Snakemake saw the SLURM job fail and submitted the rule again as a new job.
    submitted = {jid: Path(p) for _, jid, p in SUBMITTED.findall(log)}
    attempts = sorted((jid for jid, p in submitted.items() if p.parent.name == "preempted"), key=int)
    reference_jobs = [jid for jid, p in submitted.items() if p.parent.name == "reference"]
    assert attempts[0] == first_job and len(attempts) == 2, (attempts, log[-4000:])
    assert len(reference_jobs) == 1
    assert f"SLURM-job '{first_job}' failed" in log
    assert "received SIGTERM: saving after the current update" in log  # the first attempt's log, shown
    # ... and the job step ended with the trainer's own exit status (EX_TEMPFAIL), not with the shell
    # killed by the signal (143), which would leave the trainer saving outside the job.
    assert "returned non-zero exit status 75" in log, log[-4000:]

    # The trainer checkpointed on the signal and the retry resumed from that checkpoint.
    records = [json.loads(line) for line in (exps / "preempted" / "train_log.jsonl").read_text().splitlines()]
    preempted = [r for r in records if r["kind"] == "preempted"]
    resumed = [r for r in records if r["kind"] == "resume"]
    assert len(preempted) == 1 and len(resumed) == 1, [r["kind"] for r in records if r["kind"] != "train"]
    update = preempted[0]["update"]
    assert 0 < update < MAX_UPDATE and resumed[0]["update"] == update
    assert resumed[0]["checkpoint"].endswith(f"preempted/{LAST}")
    resume_line = next(
        line
        for line in (work / "results/logs/train/preempted.log").read_text().splitlines()
        if line.startswith("resuming")
    )
    assert resume_line.startswith(f"resuming from work/experiments/preempted/{LAST}: update {update},")
    assert [r["update"] for r in records if r["kind"] == "train"] == list(range(1, MAX_UPDATE + 1))
    status = json.loads((exps / "preempted" / "status.json").read_text())
    assert status["status"] == "completed" and status["update"] == MAX_UPDATE

    # Bit-exact: the interrupted run ends with the uninterrupted run's weights.
    ref_records = (exps / "reference" / "train_log.jsonl").read_text()
    assert '"kind": "resume"' not in ref_records and '"kind": "preempted"' not in ref_records
    got = load_checkpoint(exps / "preempted" / LAST)
    want = load_checkpoint(exps / "reference" / LAST)
    assert got["num_updates"] == want["num_updates"] == MAX_UPDATE
    assert got["model"].keys() == want["model"].keys()
    differing = [k for k in want["model"] if not torch.equal(got["model"][k], want["model"][k])]
    assert not differing, differing

    print(
        f"preemption through SLURM ({time.monotonic() - t0:.0f} s): scancel --signal=TERM {first_job} "
        f"at >= {signalled_at} updates; job {first_job} FAILED (exit 75) after saving at update {update}; "
        f"retry job {attempts[1]}: {resume_line!r}; reference job {reference_jobs[0]}; "
        f"{len(want['model'])} tensors equal at update {MAX_UPDATE}"
    )
