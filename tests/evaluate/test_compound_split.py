"""En-De BLEU as the authors ran it. The main tokenized BLEU column is never compound-split (TC
@70f72b7 nmt-experiments/eval_wmt_en-de.sh:16-19 reports fairseq-generate's BLEU); the ##AT## split
is a metric of its own, computed from detokenized text with an eval script's own tokenization:
tensor2tensor @bafdc1b utils/get_ende_bleu.sh:9-19 (tok_bleu_t2t) and dlcl @c632ee2
scripts/wmt_en2de_google_multi_bleu.sh:27-42 (tok_bleu_wang, the DLCL rows' metric)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_run import REPO

from pipeline_lib.evaluate import compound_split as CS
from pipeline_lib.evaluate.metric_registry import compound_split_metrics
from pipeline_lib.workflow import Commands
from tests.evaluate.test_reference_scheme import TEXT, _plan


def _run(stage: str, args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline_lib", stage, *shlex.split(args)], capture_output=True, text=True
    )


def test_replace_unicode_punctuation_as_each_perl_script():
    line = "a，b。   c“d”e１２ f．  g…【h】％。\tx"
    # moses replace-unicode-punctuation.perl:18-53 (t2t calls Moses'); `。 *` eats spaces, not the tab
    assert CS.replace_unicode_punctuation(line, "t2t") == 'a,b. c"d"e12 f. g...[h]%. \tx'
    # dlcl's copy, scripts/replace-unicode-punctuation.perl:27, turns fullwidth 1 into a quote
    assert CS.replace_unicode_punctuation(line, "wang") == 'a,b. c"d"e"2 f. g...[h]%. \tx'


def test_the_split_follows_a_tokenization_without_a():
    hyp = ["Die 3,5-jährige Studie fand „gemischte“ Ergebnisse."]
    (view,) = CS.hypothesis_view("t2t", hyp, "de")
    # tokenizer.perl -l de without -a keeps "3,5-jährige" whole; the ##AT## substitution then splits it
    # (with -a it would read "3,5 @-@ jährige" and the split would find nothing); “ became " (line 9)
    assert view == "Die 3,5 ##AT##-##AT## jährige Studie fand „ gemischte &quot; Ergebnisse ."


def test_the_workflow_scores_a_compound_split_only_where_a_table_asks():
    def commands(config: str, tmp: Path) -> Commands:
        return Commands(_plan(config, tmp))

    assert compound_split_metrics() == CS.METRICS  # the registry's, which the workflow reads
    ende = commands("config.wmt14_en_de.yaml", Path("/nonexistent"))
    assert all("--compound-split" not in ende.score(n, "test") for n in ende.plan.experiments)
    dlcl = commands("config.wmt14_en_de_dlcl_lipschitz.yaml", Path("/nonexistent"))
    # a seed run the table reaches through its group only (seed 1 is also in the significance matrix)
    assert "--compound-split wang" in dlcl.score("wang_pre_dlcl_30L-s2", "test")
    assert "--compound-split" not in dlcl.score("xu_6L", "test")  # Xu's comparison stays on tok_bleu
    assert "--metrics tok_bleu_wang" in dlcl.significance("table3")


@pytest.mark.parametrize(
    ("config", "scheme"),
    [("config.wmt14_en_de.yaml", "t2t"), ("config.wmt14_en_de_dlcl_lipschitz.yaml", "wang")],
)
def test_an_exact_hypothesis_and_a_compound_through_the_real_commands(
    config: str, scheme: str, tmp_path: Path
):
    cfg = yaml.safe_load((REPO / config).read_text())
    if scheme == "t2t":  # a table that wants the t2t column (the En-De config ships none)
        cfg["tables"]["table1"]["metric"] = "tok_bleu_t2t"
    plan = _plan_from(cfg, tmp_path)
    name = plan.config["tables"]["table1"]["baseline"]
    name = plan.seed_groups.get(name, [name])[0]  # a seed group's row: score its first run
    ds = plan.eval_dataset(name)
    raw = Path(plan.raw_dir(ds))
    raw.mkdir(parents=True)
    for lang in ("en", "de"):
        (raw / f"test.{lang}").write_text("\n".join(TEXT[lang]) + "\n", encoding="utf-8")
    assert _run("preprocess", Commands(plan).preprocess(ds, 1, test=True)).returncode == 0
    hyp = Path(plan.hyp_file(name))
    hyp.parent.mkdir(parents=True)
    status = Path(plan.status_file(name))
    status.parent.mkdir(parents=True)
    status.write_text(json.dumps({"status": "completed", "update": 1}))
    args = Commands(plan).score(name, "test")
    metric = CS.SCHEMES[scheme]
    assert f"--compound-split {scheme}" in args

    hyp.write_text(Path(plan.reference(name)).read_text(encoding="utf-8"), encoding="utf-8")
    proc = _run("score", args + " --metrics tok_bleu_retok bleu")
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(Path(plan.score_file(name)).read_text())["scores"]
    assert scores["tok_bleu_retok"]["score"] == pytest.approx(100.0)
    assert scores[metric]["score"] == pytest.approx(100.0), scores[metric]
    assert "compound-split:no" in scores["tok_bleu_retok"]["signature"]  # the main column stays plain
    assert f"compound-split:{scheme}" in scores[metric]["signature"]

    # A hypothesis with straight quotes where the reference has „…“: the script's
    # replace-unicode-punctuation makes “ a " on both sides, the main column keeps the reference's “.
    lines = Path(plan.reference(name)).read_text(encoding="utf-8").splitlines()
    hyp.write_text("\n".join([lines[0].replace("“", '"'), *lines[1:]]) + "\n", encoding="utf-8")
    assert _run("score", args + " --metrics tok_bleu_retok").returncode == 0
    scores = json.loads(Path(plan.score_file(name)).read_text())["scores"]
    assert scores[metric]["score"] == pytest.approx(100.0)
    assert scores["tok_bleu_retok"]["score"] < 100.0


def _plan_from(cfg: dict, tmp: Path):
    from pipeline_lib.workflow import Plan
    from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

    cfg = {**cfg, "workdir": str(tmp / "work"), "results": str(tmp / "results")}
    validate_config(cfg, load_schema(REPO / SCHEMA_FILE))
    return Plan(cfg)


def test_significance_on_the_wang_view_scores_as_score_does(tmp_path: Path):
    ref_tok = tmp_path / "test.de"
    ref_tok.write_text("Die 3,5 @-@ jährige Studie .\nEin Haus .\n", encoding="utf-8")
    ref = tmp_path / "ref.de"
    ref.write_text("Die 3,5-jährige Studie.\nEin Haus.\n", encoding="utf-8")
    a, b = tmp_path / "a.de", tmp_path / "b.de"
    a.write_text("Die 3,5-jährige Studie.\nEin Haus.\n", encoding="utf-8")
    b.write_text("Die 3,5 jährige Arbeit.\nEin Haus.\n", encoding="utf-8")
    sig = tmp_path / "sig.json"
    proc = _run(
        "significance",
        f"--ref {ref} --ref-tok {ref_tok} --moses-lang de --metrics tok_bleu_wang --baseline A={a} "
        f"--systems B={b} --n-samples 50 --no-matrix -o {sig}",
    )
    assert proc.returncode == 0, proc.stderr
    block = json.loads(sig.read_text())["vs_baseline"]["tok_bleu_wang"]
    for path, row in ((a, block["baseline"]), (b, block["systems"][0])):
        out = tmp_path / f"{path.stem}.json"
        proc = _run(
            "score",
            f"--hyp {path} --ref {ref} --moses-lang de --metrics tok_bleu_wang --ref-tok {ref_tok} -o {out}",
        )
        assert proc.returncode == 0, proc.stderr
        assert row["score"] == pytest.approx(json.loads(out.read_text())["scores"]["tok_bleu_wang"]["score"])
    assert block["baseline"]["score"] == pytest.approx(100.0)
