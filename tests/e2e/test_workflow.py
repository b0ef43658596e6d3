"""Tiny end-to-end run of the whole workflow (tests/fixtures/config.tiny.yaml): 400 real demo pairs,
1-2 layer d=32 models, 2 epochs; data -> BPE -> binarize -> Admin profiling -> training (one run
diverges on purpose) -> averaging -> decoding -> back-translation -> scores -> significance ->
analysis -> tables, learning curves and the stability map. A few minutes on 2 CPU cores."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from workflow_run import snakemake, snakemake_command, write_config

pytestmark = pytest.mark.slow


def _snakemake(work: Path, *args: str) -> subprocess.CompletedProcess:
    return snakemake(work, *args)  # profiles/local, 2 cores


def _table_rows(text: str, title: str) -> dict[str, list[str]]:
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| Model") and not line.startswith("| :"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def _table_header(text: str, title: str) -> list[str]:
    section = text.split(f"## {title}", 1)[1]
    line = next(x for x in section.splitlines() if x.startswith("| Model"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


SHARDS = [f"work/backtranslation/bt/shard{k}-of-3.bpe" for k in range(3)]


def _run_all_killed_in_shard_1(work: Path) -> None:
    """`snakemake all`, stopped hard (SIGKILL to its whole process group, as a lost node) while
    back-translation shard 1 of 3 runs; shards 0 and 2 were done before."""
    cmd, env = snakemake_command(work, "all")
    log = work / "killed_run.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 600
        while not any("--shard 1/3" in cmdline for cmdline in _cmdlines()):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.02)
        time.sleep(0.3)  # inside the job: torch imported, the checkpoint loading
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (work / SHARDS[1]).exists(), "shard 1 finished before the kill: nothing was tested"


def _cmdlines() -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        try:
            out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            continue
    return out


def test_tiny_workflow_end_to_end(tmp_path: Path):
    cfg = write_config(tmp_path)

    # Back-translation shards 0 and 2 first (and the reverse model they need); then `all`, killed
    # while shard 1 runs. The rerun's only translation job is shard 1: finished shards are kept.
    # The two report specs are built here too: a `run:` job (no inputs, done in milliseconds) that ends
    # in the instant between Snakemake 9.27's submitting it and marking its output incomplete
    # (executors/local.py: run_job) is left, by a SIGKILL then, with its output and no record at all,
    # so that a later config edit cannot rerun it. Upstream's race, not the retitle check below.
    proc = _snakemake(tmp_path, SHARDS[0], SHARDS[2], "results/report_spec.json",
                      "results/plots/learning_curves.spec.json")  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    done = {s: (tmp_path / s).stat().st_mtime_ns for s in (SHARDS[0], SHARDS[2])}
    _run_all_killed_in_shard_1(tmp_path)
    assert _snakemake(tmp_path, "--unlock").returncode == 0
    plan = _snakemake(tmp_path, "all", "-n", "--rerun-incomplete")
    jobs = re.findall(r"rule translate_backtranslation:\n(?:\s+.*\n)*?\s+wildcards: (.*)", plan.stdout)
    assert jobs == ["bt=bt, shard=1, shards=3"], plan.stdout[-3000:]
    proc = _snakemake(tmp_path, "all", "--rerun-incomplete")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert {s: (tmp_path / s).stat().st_mtime_ns for s in done} == done
    results = tmp_path / "results"
    tables = (results / "tables.md").read_text()

    # Table 1: every number is the score file's, rounded; the diverged run says so.
    rows = _table_rows(tables, cfg["tables"]["table1"]["title"])
    score = json.loads((results / "experiments/base_2L2L/test.score.json").read_text())["scores"]
    base = rows["2L-2L-32D Post-LN"]
    header = _table_header(tables, cfg["tables"]["table1"]["title"])
    column = {"T↓": "ter", "M↑": "meteor", "BLEU↑": "tok_bleu", "sacreBLEU↑": "bleu"}  # table1: tok_bleu
    for label, metric in column.items():
        assert base[header.index(label)].rstrip("†") == f"{score[metric]['score']:.1f}", (label, header)
    admin = json.loads((results / "experiments/admin_2L2L/test.score.json").read_text())["scores"]
    bleu = header.index("BLEU↑")
    assert rows["2L-2L-32D Admin"][bleu].rstrip("†") == f"{admin['tok_bleu']['score']:.1f}"
    assert (
        rows["2L-2L-32D Admin"][header.index("Δ")]
        == f"{admin['tok_bleu']['score'] - score['tok_bleu']['score']:+.1f}"
    )
    assert "diverged" in rows["2L-2L Post-LN, lr 5"]
    status = json.loads((tmp_path / "work/experiments/base_2L2L_hot/status.json").read_text())
    assert status["status"] == "diverged"
    # Comparison tables show each run's budget: the updates in its trainer's status.json.
    residual = _table_rows(tables, cfg["tables"]["comparisons"][0]["title"])
    base_status = json.loads((tmp_path / "work/experiments/base_2L2L/status.json").read_text())
    assert residual["2L-2L-32D Post-LN"][7] == f"{base_status['update']:,}"
    placeholder = json.loads((results / "experiments/base_2L2L_hot/test.score.json").read_text())
    assert placeholder["status"] == "diverged" and placeholder["scores"] == {}
    # Signatures and the Table 3 matrix, the back-translation table.
    assert score["bleu"]["signature"] in tables
    # "·": a system below the translation floor (the tiny models hardly translate) gets no +/-/=
    assert re.search(r"\| a:2L-2L-32D Post-LN \| [\d.]+ \|  \| [+=·-] \|", tables), tables
    assert "2L-2L-32D Admin + BT" in tables
    mix = json.loads((tmp_path / "work/data/bt-bt/bpe/meta.json").read_text())["backtranslation"]
    assert mix["synthetic_pairs"] + mix["synthetic_dropped_empty"] == 120 and mix["tag"] == "<BT>"
    # Admin profiles live in each experiment's folder.
    assert (tmp_path / "work/experiments/admin_2L2L/admin_profile.json").is_file()
    # Plots and the stability map.
    for png in ("plots/learning_curves.png", "plots/stability_map.png", "analysis/word_accuracy.png"):
        assert (results / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stab = (results / "stability_map.md").read_text()
    assert "## Post-LN, 2L-2L:" in stab and "## Admin, 2L-2L:" in stab
    assert stab.count("| 0.002 | ") == 2 and stab.count("| 5 | ") == 2  # one lr row per method

    # Nothing left to do: a second run is a no-op.
    again = _snakemake(tmp_path, "all", "-n")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-2000:]
    # An edit of the config that only changes the tables (a title) regenerates them, and only them
    # (not the learning curves, which read the training logs only).
    write_config(tmp_path, lambda c: c["tables"]["table1"].update(title="Table 1, retitled"))
    retitled = _snakemake(tmp_path, "all", "-n")
    rules = set(re.findall(r"^(?:local)?rule (\w+):", retitled.stdout + retitled.stderr, re.M))
    assert {"report_spec", "report"} <= rules <= {"report_spec", "report", "stability_map", "all"}, (
        rules,
        retitled.returncode,
        (retitled.stdout + retitled.stderr)[-4000:],
    )

    # The cleaned valid split scores against the references of the pairs that survived cleaning.
    valid = _snakemake(tmp_path, "results/experiments/base_2L2L/valid.score.json")
    assert valid.returncode == 0, (valid.stdout + valid.stderr)[-6000:]
    valid_score = json.loads((results / "experiments/base_2L2L/valid.score.json").read_text())
    kept = (tmp_path / "work/data/tiny/tok/valid.fr").read_text().count("\n")
    assert valid_score["n_segments"] == kept > 0

    # Snakemake's own HTML report of the finished run (it needs pygments, a pinned dependency).
    report = _snakemake(tmp_path, "--report", "report.html")
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    html = (tmp_path / "report.html").read_text()
    assert "Snakemake Report" in html and "tables.md" in html and "stability_map.png" in html
