"""`significance`: p-values and CIs equal `sacrebleu --paired-bs`, and the Table-3 matrix is coherent."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate import significance as S
from pipeline_lib.evaluate.segments import read_segments

REF = Path(__file__).parents[1] / "fixtures" / "evaluate" / "ref.en"


def _variant(lines: list[str], p_drop: float, p_replace: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for line in lines:
        words = [w for w in line.split() if rng.random() > p_drop]
        out.append(" ".join("the" if rng.random() < p_replace else w for w in words))
    return out


@pytest.fixture
def systems(tmp_path: Path) -> list[Path]:
    """Three systems: two close ones and a clearly worse one."""
    refs = read_segments(REF)
    paths = []
    for i, (p_drop, p_rep) in enumerate([(0.1, 0.1), (0.15, 0.1), (0.3, 0.2)]):
        path = tmp_path / f"sys{i + 1}.en"
        path.write_text("\n".join(_variant(refs, p_drop, p_rep, seed=i)) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def _cli_paired_bs(ref: Path, paths: list[Path], metric: str = "bleu", seed: str = "12345") -> list[dict]:
    env = {**os.environ, "SACREBLEU_SEED": seed}
    proc = subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(ref), "-i", *map(str, paths), "--paired-bs", "-m", metric]
        + ["-f", "json"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(proc.stdout)


def test_matches_sacrebleu_paired_bs_cli(tmp_path: Path, systems: list[Path]) -> None:
    out = tmp_path / "sig.json"
    md = tmp_path / "sig.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline_lib",
            "significance",
            "--ref",
            str(REF),
            "--baseline",
            str(systems[0]),
        ]
        + ["--systems", *map(str, systems[1:]), "-o", str(out), "--markdown", str(md)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    cli = _cli_paired_bs(REF, systems)
    block = result["vs_baseline"]["bleu"]
    ours = [block["baseline"], *block["systems"]]
    assert len(cli) == len(ours) == 3
    for theirs, mine in zip(cli, ours, strict=True):
        assert mine["score"] == theirs["BLEU"]["score"]
        assert mine["mean"] == theirs["BLEU"]["mean"]
        assert mine["ci"] == theirs["BLEU"]["ci"]
        if theirs["BLEU"]["p_value"] is None:
            assert mine["p_value"] is None
        else:
            assert mine["p_value"] == theirs["BLEU"]["p_value"]
    assert "bs:1000|seed:12345" in block["signature"]
    # the close pair is not significantly different, the bad system is
    assert block["systems"][0]["significant"] is False
    assert block["systems"][1]["significant"] is True and block["systems"][1]["better"] is False
    assert "| a:sys1 |" in md.read_text()


def test_pairwise_matrix_rows_match_cli_and_are_antisymmetric(systems: list[Path]) -> None:
    refs = read_segments(REF)
    named = [(p.stem, read_segments(p)) for p in systems]
    pw = S.pairwise_matrix(named, refs, "bleu")
    n = len(named)
    for i in range(n):
        assert pw["matrix"][i][i] == "" and pw["p_values"][i][i] is None
        for j in range(n):
            if i != j:
                assert pw["p_values"][i][j] == pw["p_values"][j][i]
                assert {pw["matrix"][i][j], pw["matrix"][j][i]} in ({"="}, {"+", "-"})
    # the (sys2, sys3) cell equals the CLI run with sys2 as the baseline
    cli = _cli_paired_bs(REF, systems[1:])
    assert pw["p_values"][1][2] == cli[1]["BLEU"]["p_value"]
    assert pw["matrix"] == [["", "=", "+"], ["=", "", "+"], ["-", "-", ""]]
    table = S.render_matrix_markdown(pw)
    assert "| c:sys3 | 31.3 | - | - |  |" in table


def test_ter_lower_is_better_in_matrix(systems: list[Path]) -> None:
    refs = read_segments(REF)
    named = [(p.stem, read_segments(p)) for p in (systems[0], systems[2])]
    pw = S.pairwise_matrix(named, refs, "ter")
    assert pw["scores"][0] < pw["scores"][1]  # sys1 has the lower (better) TER
    assert pw["matrix"][0][1] == "+"


def test_other_seed_matches_cli_with_that_seed(systems: list[Path]) -> None:
    refs = read_segments(REF)
    named = [(p.stem, read_segments(p)) for p in systems[:2]]
    ours = S.paired_bootstrap(named, refs, "bleu", seed=777)
    cli = _cli_paired_bs(REF, systems[:2], seed="777")
    assert ours["results"][1]["p_value"] == cli[1]["BLEU"]["p_value"]
    assert ours["results"][1]["ci"] == cli[1]["BLEU"]["ci"]
    assert "SACREBLEU_SEED" not in os.environ or os.environ["SACREBLEU_SEED"] != "777"


def test_rejects_bad_settings_and_inputs(tmp_path: Path, systems: list[Path]) -> None:
    refs = read_segments(REF)
    named = [(p.stem, read_segments(p)) for p in systems[:2]]
    with pytest.raises(ConfigError, match="seed"):
        S.paired_bootstrap(named, refs, seed=0)
    short = tmp_path / "short.en"
    short.write_text("\n".join(read_segments(systems[1])[:10]) + "\n", encoding="utf-8")
    out = tmp_path / "sig.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline_lib",
            "significance",
            "--ref",
            str(REF),
            "--baseline",
            str(systems[0]),
        ]
        + ["--systems", str(short), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "short.en has 10 lines" in proc.stderr
    assert not out.exists()


def test_retok_bleu_bootstrap_matches_sacrebleu_cli_on_tokenized_text(
    tmp_path: Path, systems: list[Path]
) -> None:
    """--metrics tok_bleu_retok: the systems and reference are tokenized (test treatment), and the bootstrap
    equals sacrebleu's --paired-bs on those files with tokenize none, smoothing none."""
    from pipeline_lib.data.moses import tokenize_like_test_set

    out = tmp_path / "sig.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "significance", "--ref", str(REF), "--baseline", str(systems[0]),
         "--systems", *map(str, systems[1:]), "-o", str(out), "--metrics", "tok_bleu_retok", "--moses-lang", "en",
         "--n-samples", "200"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    tok_files = []
    for path in [REF, *systems]:
        lines = tokenize_like_test_set(read_segments(path), "en")
        tok = tmp_path / f"{path.name}.tok"
        tok.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        tok_files.append(tok)
    env = {**os.environ, "SACREBLEU_SEED": "12345"}
    cli = json.loads(subprocess.run(
        [sys.executable, "-m", "sacrebleu", str(tok_files[0]), "-i", *map(str, tok_files[1:]), "--paired-bs",
         "--paired-bs-n", "200", "-m", "bleu", "--tokenize", "none", "--smooth-method", "none", "--force", "-f", "json"],
        capture_output=True, text=True, check=True, env=env,
    ).stdout)  # fmt: skip
    block = json.loads(out.read_text())["vs_baseline"]["tok_bleu_retok"]
    for theirs, mine in zip(cli, [block["baseline"], *block["systems"]], strict=True):
        assert mine["score"] == theirs["BLEU"]["score"]
        if theirs["BLEU"]["p_value"] is not None:
            assert mine["p_value"] == theirs["BLEU"]["p_value"]
    assert "tok:none" in block["signature"]
    rc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "significance", "--ref", str(REF), "--baseline", str(systems[0]),
         "--systems", str(systems[1]), "-o", str(out), "--metrics", "tok_bleu_retok"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert rc.returncode == 2 and "--moses-lang" in rc.stderr
