"""The paper configs as shipped, end to end, on a miniature statmt.org mirror (tests/helpers/wmt_mirror.py)
served by a real HTTP server: download (pinned by the mirror's SHA256SUMS), News Crawl, preprocess,
BPE, Admin profiling, the reverse model, back-translation, training at the paper's depths (60L-12L
and all), averaging, decoding, scoring on tokenized BLEU and sacreBLEU, significance and the tables.

The command is the user's smoke test of a cluster setup:
    snakemake --profile local all --configfile config.wmt14_en_fr.yaml config.smoke.yaml mirror.yaml
where mirror.yaml only points the downloads at the mirror and drops GPU resources (this machine has
none). Widths, epochs and line counts come from config.smoke.yaml."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from wmt_mirror import QUOTED_TEST_LINE, build, serve
from workflow_run import BIN, LOCAL_PROFILE, REPO

pytestmark = pytest.mark.slow
# On top of config.smoke.yaml: no GPU here, and CI-sized runs (a few updates of each model; the
# depths, 60L-12L included, stay as shipped).
SMOKE_CI = {"gpu": False, "d_model": 16, "ffn_dim": 32, "max_epoch": 1, "max_tokens": 4000,
            "train_lines": 300, "mono_lines": 40}  # fmt: skip


# Alone on 2 cores a run takes 3.5-4.5 min; beside the rest of `make test` it has taken 18.
RUN_TIMEOUT_S = 1800


def _log_tail(run: Path, lines: int = 60) -> str:
    """The last lines of Snakemake's newest log: which jobs were running when the time ran out."""
    logs = sorted((run / ".snakemake" / "log").glob("*.snakemake.log"))
    return "\n".join(logs[-1].read_text().splitlines()[-lines:]) if logs else "(no log)"


def _run_paper_config(config: str, tmp_path: Path) -> tuple[dict, Path, Path]:
    mirror_root = tmp_path / "mirror"
    sums = build(mirror_root)
    run = tmp_path / "run"
    run.mkdir()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1",
           "SACREBLEU": str(tmp_path / "sacrebleu")}  # fmt: skip
    with serve(mirror_root) as base:
        override = run / "mirror.yaml"
        override.write_text(
            yaml.safe_dump({"download": {"mirror": base, "checksums": str(sums)}, "smoke": SMOKE_CI})
        )
        cmd = [str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory", str(run),
               "--profile", str(LOCAL_PROFILE), "--cores", "2", "all",
               "--configfile", str(REPO / config), str(REPO / "config.smoke.yaml"), str(override)]  # fmt: skip
        try:
            proc = subprocess.run(
                cmd, cwd=run, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"no end after {RUN_TIMEOUT_S} s; Snakemake's log ends:\n{_log_tail(run)}")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-8000:]
    cfg = yaml.safe_load((REPO / config).read_text())
    return cfg, run / cfg["workdir"] / "smoke", run / cfg["results"] / "smoke"


def _rows(tables: str, title: str) -> dict[str, list[str]]:
    section = tables.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| Model", "| :")):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def _score(results: Path, exp: str) -> dict:
    return json.loads((results / "experiments" / exp / "test.score.json").read_text())["scores"]


def _check_table1(cfg: dict, results: Path) -> None:
    tables = (results / "tables.md").read_text()
    t1 = cfg["tables"]["table1"]
    rows = list(_rows(tables, t1["title"]).values())
    names = list(dict.fromkeys([t1["baseline"], *t1["rows"]]))
    assert len(rows) == len(names)
    base = _score(results, t1["baseline"])["tok_bleu"]["score"]
    section = tables.split(f"## {t1['title']}", 1)[1]
    header = next(x for x in section.splitlines() if x.startswith("| Model"))
    col = {c.strip(): i - 1 for i, c in enumerate(header.strip("|").split("|"))}
    bleu, sacre, delta = col["BLEU↑"], col["sacreBLEU↑"], col["Δ"]
    for name, cells in zip(names, rows, strict=True):
        score = _score(results, name)
        if cells[bleu] == "diverged":
            continue
        assert cells[bleu].rstrip("†") == f"{score['tok_bleu']['score']:.1f}", (name, cells)  # tokenized
        assert cells[sacre].rstrip("†") == f"{score['bleu']['score']:.1f}", (name, cells)  # sacreBLEU
        if name != t1["baseline"]:
            assert cells[delta] == f"{score['tok_bleu']['score'] - base:+.1f}"
    assert "tokenized BLEU as fairseq-generate --remove-bpe prints it" in tables
    sig = json.loads((results / "significance" / "table3.json").read_text())
    assert list(sig["pairwise"]) == ["tok_bleu"]  # Table 3 is on tokenized BLEU, as in the paper
    assert cfg["tables"]["significance"]["title"] in tables


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_wmt14_en_fr_as_shipped_on_a_mirror(tmp_path: Path):
    cfg, work, results = _run_paper_config("config.wmt14_en_fr.yaml", tmp_path)
    _check_table1(cfg, results)
    data = work / "data" / "wmt14_en_fr"
    # The test reference keeps « » for tokenized BLEU (no normalize-punctuation on test).
    assert (
        (data / "tok-test" / "test.fr").read_text().splitlines()[QUOTED_TEST_LINE].startswith("« C&apos; est")
    )
    # Back-translation ran on News Crawl from the mirror, and Table 4 reads its models.
    assert (data / "raw" / "mono.fr").stat().st_size > 0
    manifest = json.loads((data / "orig_mono" / "manifest.json").read_text())
    assert all(entry["pinned"] for entry in manifest.values())
    tables = (results / "tables.md").read_text()
    bt_table = next(c for c in cfg["tables"]["comparisons"] if c["name"] == "backtranslation")
    table4 = _rows(tables, bt_table["title"])
    assert any(cells[5] == "yes" for cells in table4.values())  # the BT column
    # As Edunov et al.: untagged, in shards (config.smoke.yaml keeps 2 of the 16), each its own job.
    mix = json.loads((work / "data" / "bt-newscrawl_fr" / "bpe" / "meta.json").read_text())["backtranslation"]
    assert mix["tag"] is None and len(mix["synthetic_src"]) == 2
    mono_lines = (data / "bpe" / "mono.fr").read_text().count("\n")
    assert mix["synthetic_pairs"] + mix["synthetic_dropped_empty"] == mono_lines > 0
    logs = sorted(p.name for p in (results / "logs" / "translate_backtranslation" / "newscrawl_fr").iterdir())
    assert logs == ["shard0-of-2.log", "shard1-of-2.log"]
    status = json.loads((work / "experiments" / "enfr_60L12L_admin_bt" / "status.json").read_text())
    assert status["status"] in ("completed", "diverged")


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
def test_wmt14_en_de_as_shipped_on_a_mirror(tmp_path: Path):
    cfg, work, results = _run_paper_config("config.wmt14_en_de.yaml", tmp_path)
    _check_table1(cfg, results)
    score = _score(results, "ende_6L6L_default")
    # TC's En-De eval splits no compounds (eval_wmt_en-de.sh:16-19), and no En-De table asks for t2t's
    assert score["tok_bleu"]["fairseq"].startswith("BLEU4 = ") and "tok_bleu_t2t" not in score
    download = json.loads((work / "data" / "wmt14_en_de" / "raw" / "download.json").read_text())
    assert download["wmt13.test.tgz"]["verified_by"] == "mirror sha256"
