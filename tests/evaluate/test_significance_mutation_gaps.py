"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/evaluate/significance.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import os

import pytest

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.metric_registry import ScoreInputs
from pipeline_lib.evaluate.metrics import (
    chrf2,
    sacre_bleu,
    score_chrf2,
    score_sacre_bleu,
    score_ter,
    score_tokenized_bleu,
    ter,
    tokenized_bleu,
)
from pipeline_lib.evaluate.significance import (
    paired_bootstrap,
    pairwise_matrix,
    render_matrix_markdown,
    sign,
    validate,
)

# -- paired bootstrap and the pairwise matrix (pipeline_lib/evaluate/significance.py) ------------

REFS = ["the cat sat on the mat", "a dog ran", "it is raining today", "we like tea"] * 3
SYSTEMS = [
    ("a", ["the cat sat on a mat", "a dog ran", "it rains today", "we like tea"] * 3),
    ("b", ["cat sat mat", "dog", "raining", "tea"] * 3),
    ("c", ["the cat sat on the mat", "a dog runs", "it is raining", "we like coffee"] * 3),
]


def test_significance_settings_boundaries() -> None:
    validate(1, 1)  # one sample and seed 1 are valid
    with pytest.raises(ConfigError):
        validate(0, 1)
    with pytest.raises(ConfigError):
        validate(1, 0)


@pytest.mark.parametrize("before", [None, "41"])
def test_the_seed_is_sacrebleus_during_the_test_only(monkeypatch, before: str | None) -> None:
    # sacrebleu's signature shows the seed it read from SACREBLEU_SEED; afterwards the caller's value
    # (or its absence) is back
    if before is None:
        monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    else:
        monkeypatch.setenv("SACREBLEU_SEED", before)
    out = paired_bootstrap(SYSTEMS[:2], REFS, n_samples=9, seed=7)
    assert "|seed:7|" in out["signature"]
    assert os.environ.get("SACREBLEU_SEED") == before


def test_paired_bootstrap_defaults_and_result_fields() -> None:
    out = paired_bootstrap(SYSTEMS[:2], REFS, n_samples=9)
    assert out["metric"] == "bleu"
    assert "|bs:9|seed:12345|" in out["signature"]  # the sample count and default seed reach sacrebleu
    assert [r["name"] for r in out["results"]] == ["a", "b"]
    assert all(set(r) == {"name", "score", "mean", "ci", "p_value"} for r in out["results"])
    assert isinstance(out["results"][0]["mean"], float) and out["results"][0]["p_value"] is None
    # sacrebleu's p = (hits + 1) / (samples + 1): with 9 samples a multiple of 0.1
    assert round(out["results"][1]["p_value"] * 10, 9).is_integer()


def test_sign_at_alpha_is_not_significant_and_follows_the_metric_direction() -> None:
    assert sign(30.0, 20.0, 0.05, "bleu", 0.05) == "="  # p < alpha is significant, p == alpha is not
    assert sign(30.0, 20.0, 0.04, "bleu", 0.05) == "+"
    assert sign(30.0, 20.0, 0.01, "ter", 0.05) == "-"  # TER: lower is better


def test_pairwise_matrix_rows_seed_first_row_and_progress() -> None:
    calls: list[tuple[int, int]] = []
    matrix = pairwise_matrix(
        SYSTEMS, REFS, n_samples=9, seed=7, progress=lambda done, total: calls.append((done, total))
    )
    assert calls == [(1, 2), (2, 2)]
    assert "|bs:9|seed:7|" in matrix["signature"]
    row_b = paired_bootstrap(SYSTEMS[1:], REFS, n_samples=9, seed=7)["results"]
    assert matrix["p_values"][1][2] == matrix["p_values"][2][1] == row_b[1]["p_value"]
    assert matrix["scores"] == [r["score"] for r in paired_bootstrap(SYSTEMS, REFS, n_samples=9)["results"]]
    first = paired_bootstrap(SYSTEMS, REFS, n_samples=9, seed=7)
    assert pairwise_matrix(SYSTEMS, REFS, n_samples=9, seed=7, first_row=first) == matrix
    default = pairwise_matrix(SYSTEMS[:2], REFS)
    assert default["metric"] == "bleu" and "|bs:1000|seed:12345|" in default["signature"]


def test_render_matrix_markdown_layout() -> None:
    pairwise = {
        "systems": ["base", "deep"],
        "metric": "bleu",
        "scores": [27.31, 28.46],
        "matrix": [["", "-"], ["+", ""]],
        "alpha": 0.05,
        "signature": "SIG",
    }
    assert render_matrix_markdown(pairwise) == (
        "| Model | BLEU | a | b |\n"
        "| :--- | :---: | :---: | :---: |\n"
        "| a:base | 27.3 |  | - |\n"
        "| b:deep | 28.5 | + |  |\n"
        "\n"
        "Cell (i, j): row i significantly better (+), worse (-) or not different (=) than column j, "
        "paired bootstrap p < 0.05; SIG\n"
    )
    assert render_matrix_markdown({**pairwise, "metric": "chrf"}).startswith("| Model | chrF2 | a | b |\n")
    assert render_matrix_markdown({**pairwise, "metric": "ter"}).startswith("| Model | TER | a | b |\n")


def test_metric_registry_entry_points_score_the_hypothesis_against_the_reference() -> None:
    hyps, refs = ["a b c d e"], ["a b c x e"]
    inputs = ScoreInputs(hyps=hyps, refs=refs, tokenized=(hyps, refs, {"hyp_tok": "h", "ref_tok": "r"}))
    assert score_sacre_bleu(inputs) == sacre_bleu(hyps, refs)
    assert score_ter(inputs) == ter(hyps, refs) and score_chrf2(inputs) == chrf2(hyps, refs)
    assert score_ter(ScoreInputs(hyps=["a b"], refs=["a b c d"]))["score"] == 50.0  # not swapped
    assert score_chrf2(ScoreInputs(hyps=["ab"], refs=["abcd"]))["score"] == pytest.approx(2500 / 53)
    assert score_tokenized_bleu(inputs) == {**tokenized_bleu(hyps, refs), "hyp_tok": "h", "ref_tok": "r"}
    with pytest.raises(ValueError, match="needs the tokenized pair"):
        score_tokenized_bleu(ScoreInputs(hyps=hyps, refs=refs))


def test_paired_tokenized_bleu_and_chrf_score_as_the_corpus_metrics() -> None:
    # "a,b" stays one token without 13a tokenization; a missing 4-gram gives 0 without smoothing
    refs = ["the cat , sat on the mat", "a,b is here now"]
    hyps = [
        ("base", ["the cat sat on mat", "a,b is here"]),
        ("other", ["the cat , sat", "a , b is here now"]),
    ]
    out = paired_bootstrap(hyps, refs, "tok_bleu", n_samples=5)
    for (_, system), result in zip(hyps, out["results"], strict=True):
        assert result["score"] == pytest.approx(tokenized_bleu(system, refs)["score"], abs=1e-9)
    assert out["results"][0]["score"] == 0.0  # no 4-gram match in "base", no smoothing
    chrf = paired_bootstrap(hyps, refs, "chrf", n_samples=5)
    for (_, system), result in zip(hyps, chrf["results"], strict=True):
        assert result["score"] == pytest.approx(chrf2(system, refs)["score"], abs=1e-9)
