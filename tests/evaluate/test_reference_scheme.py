"""Tokenized BLEU tokenizes a hypothesis exactly as its dataset's reference was tokenized: a perfect
hypothesis scores 100 through the commands each config generates (preprocess of the test split, then
score), with hyphens, apostrophes, numbers and brackets in the text. The IWSLT'14 reference is
tokenized without -a and lowercased; scoring it with the WMT test scheme gave 28 BLEU."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_run import REPO

from pipeline_lib.workflow import Commands, Plan
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

TEXT = {
    "en": [
        'The well-known author\'s 3.5-year study (1999-2003) found "mixed" results: 12,000 cases [sic].',
        "It's a state-of-the-art, low-cost approach -- isn't it? See pp. 10-12 & fig. 3(b).",
        "Prices rose 4.5% to $1,250.99 in Q3/2014; e-mail co-workers@example.org.",
    ],
    "fr": [
        "L'auteur bien-connu a étudié 12 000 cas (1999-2003) : « résultats mitigés » [sic] aujourd'hui.",
        "C'est une approche peu coûteuse -- n'est-ce pas ? Voir p. 10-12 et fig. 3(b).",
        "Les prix ont augmenté de 4,5 % à 1 250,99 $ au T3/2014 ; écrivez-nous : co-workers@example.org.",
    ],
    "de": [
        "Die 3,5-jährige Studie (1999-2003) des Autors fand „gemischte“ Ergebnisse: 12.000 Fälle [sic].",
        "Ein kostengünstiger Ansatz -- oder nicht? Siehe S. 10-12 und Abb. 3(b).",
        "Die Preise stiegen um 4,5 % auf 1.250,99 $ im Q3/2014; E-Mail an Mit-Arbeiter@example.org.",
    ],
}
CONFIGS = [
    "config.wmt14_en_fr.yaml",
    "config.wmt14_en_de.yaml",
    "config.wmt14_en_de_dlcl_lipschitz.yaml",  # its first row: the rebuilt WMT'16 data, tokenized without -a
    "config.iwslt14_fig10.yaml",
    "tiny",
]


def _plan(config: str, tmp: Path) -> Plan:
    if config == "tiny":
        cfg = yaml.safe_load((REPO / "tests/fixtures/config.tiny.yaml").read_text())
        for ds in cfg["datasets"].values():
            ds["path"] = str(tmp / "corpus")
    else:
        cfg = yaml.safe_load((REPO / config).read_text())
    cfg.update(workdir=str(tmp / "work"), results=str(tmp / "results"))
    validate_config(cfg, load_schema(REPO / SCHEMA_FILE))
    return Plan(cfg)


def _run(stage: str, args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", stage, *shlex.split(args)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("config", CONFIGS)
def test_a_perfect_hypothesis_scores_100_tokenized_bleu(config: str, tmp_path: Path):
    plan = _plan(config, tmp_path)
    name = next(n for n, e in plan.experiments.items() if not e.get("backtranslation"))
    ds = plan.eval_dataset(name)
    src, tgt = plan.exp_langs(name)
    raw = Path(plan.raw_dir(ds))
    raw.mkdir(parents=True)
    for lang in (src, tgt):
        (raw / f"test.{lang}").write_text("\n".join(TEXT[lang]) + "\n", encoding="utf-8")
    _run("preprocess", Commands(plan).preprocess(ds, 1, test=True))

    # The ideal system's output: the reference itself, as detokenized text.
    hyp = Path(plan.hyp_file(name))
    hyp.parent.mkdir(parents=True)
    hyp.write_text(Path(plan.reference(name)).read_text(encoding="utf-8"), encoding="utf-8")
    status = Path(plan.status_file(name))
    status.parent.mkdir(parents=True)
    status.write_text(json.dumps({"status": "completed", "update": 1}))
    args = Commands(plan).score(name, "test")
    assert "--ref-tok-meta" in args
    _run("score", args + " --metrics tok_bleu_retok bleu")
    scores = json.loads(Path(plan.score_file(name)).read_text())["scores"]
    assert scores["tok_bleu_retok"]["score"] == pytest.approx(100.0), scores["tok_bleu_retok"]
    assert scores["bleu"]["score"] == pytest.approx(100.0)


def test_the_iwslt_reference_is_tokenized_without_a_and_lowercased(tmp_path: Path):
    """The schemes differ where it matters: otherwise the test above could not fail."""
    plan = _plan("config.iwslt14_fig10.yaml", tmp_path)
    ds = plan.eval_dataset(next(iter(plan.experiments)))
    raw = Path(plan.raw_dir(ds))
    raw.mkdir(parents=True)
    for lang in ("de", "en"):
        (raw / f"test.{lang}").write_text("\n".join(TEXT[lang]) + "\n", encoding="utf-8")
    _run("preprocess", Commands(plan).preprocess(ds, 1, test=True))
    meta = json.loads((Path(plan.tok_dir(ds, "test")) / "meta.json").read_text())
    assert meta["tokenization"]["test"]["aggressive_dash_splits"] is False
    assert meta["tokenization"]["test"]["lowercase"] is True
    tok = (Path(plan.tok_dir(ds, "test")) / "test.en").read_text()
    assert "well-known" in tok and "The" not in tok


def test_score_refuses_a_tokenized_reference_without_its_scheme(tmp_path: Path):
    (tmp_path / "h.fr").write_text("a b\n")
    (tmp_path / "r.fr").write_text("a b\n")
    (tmp_path / "test.fr").write_text("a b\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "score", "--hyp", str(tmp_path / "h.fr"), "--ref",
         str(tmp_path / "r.fr"), "--ref-tok", str(tmp_path / "test.fr"), "--moses-lang", "fr",
         "--metrics", "tok_bleu_retok", "-o", str(tmp_path / "s.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2 and "--ref-tok-meta" in proc.stderr, proc.stderr
