"""Fast tests for the seed_groups mutants the other tests let survive (make mutate MODULE=seed_groups).

Oracles: means and sample standard deviations computed by hand (the n - 1 formula), on runs built
in memory.
"""

from __future__ import annotations

import math

import pytest

from pipeline_lib.errors import InputError
from pipeline_lib.report.inputs import Run
from pipeline_lib.report.seed_groups import SeedGroup, load_groups, members


def _run(name: str, seed: int, bleu: float | None, *, diverged: bool = False, update: int = 500,
         ppl: float | None = 10.0, sig: str | None = None) -> Run:  # fmt: skip
    status = {"status": "diverged" if diverged else "completed", "update": update}
    if ppl is not None:
        status["valid"] = {"ppl": ppl}
    scores = {} if bleu is None else {"bleu": {"score": bleu, "signature": sig}}
    info = {"seed": seed, "encoder_layers": 6, "decoder_layers": 6, "residual": "admin"}
    return Run(name, info, status, {"scores": scores}, parameters=1000 + seed)


def test_the_cell_is_mean_and_sample_std_of_the_converged_runs() -> None:
    runs = [
        _run("g-s1", 1, 30.0),
        _run("g-s2", 2, 31.0),
        _run("g-s3", 3, 35.0),
        _run("g-s4", 4, 2.0, diverged=True),
    ]
    g = SeedGroup("g", "6L-6L Admin", runs)
    mean = (30.0 + 31.0 + 35.0) / 3
    std = math.sqrt(((30 - mean) ** 2 + (31 - mean) ** 2 + (35 - mean) ** 2) / 2)
    assert g.values("bleu") == [30.0, 31.0, 35.0]
    assert g.metric("bleu") == pytest.approx(mean) and g.std("bleu") == pytest.approx(std)
    assert (
        g.cell("bleu") == f"{mean:.2f} ± {std:.2f} (n=3; 1/4 diverged)" == "32.00 ± 2.65 (n=3; 1/4 diverged)"
    )
    assert not g.diverged and [r.name for r in g.converged] == ["g-s1", "g-s2", "g-s3"]


def test_one_value_has_no_spread_and_no_value_is_a_dash() -> None:
    g = SeedGroup("g", "L", [_run("a", 1, 20.0), _run("b", 2, None)])
    assert g.std("bleu") is None and g.cell("bleu") == "20.00 (n=1)"
    assert g.metric("chrf") is None and g.std("chrf") is None and g.cell("chrf") == "–"
    two = SeedGroup("g", "L", [_run("a", 1, 20.0), _run("b", 2, 21.0)])
    assert two.std("bleu") == pytest.approx(math.sqrt(0.5)) and two.cell("bleu") == "20.50 ± 0.71 (n=2)"


def test_status_is_diverged_only_when_every_run_diverged() -> None:
    g = SeedGroup("g", "L", [_run("a", 1, 1.0, diverged=True), _run("b", 2, 1.0, diverged=True)])
    assert g.diverged and g.status == {"status": "diverged"} and g.metric("bleu") is None
    mixed = SeedGroup("g", "L", [_run("a", 1, 30.0, ppl=4.0), _run("b", 2, 0.0, diverged=True, ppl=99.0),
                                 _run("c", 3, 30.0, ppl=8.0)])  # fmt: skip
    assert mixed.status == {"status": "completed", "update": 500, "valid": {"ppl": 6.0}}
    differing = SeedGroup(
        "g", "L", [_run("a", 1, 30.0, update=400, ppl=None), _run("b", 2, 30.0, update=500, ppl=None)]
    )
    assert differing.status == {"status": "completed", "update": None, "valid": {}}
    one_ppl = SeedGroup("g", "L", [_run("a", 1, 30.0, ppl=None), _run("b", 2, 30.0, ppl=5.0)])
    assert one_ppl.status["valid"] == {"ppl": 5.0}


def test_info_parameters_and_signature_come_from_the_members() -> None:
    runs = [
        _run("a", 7, 30.0, diverged=True, sig="A"),
        _run("b", 9, 31.0, sig=None),
        _run("c", 5, 32.0, sig="C"),
    ]
    g = SeedGroup("g", "Grp", runs)
    assert g.info == {
        "encoder_layers": 6,
        "decoder_layers": 6,
        "residual": "admin",
        "label": "Grp",
        "seeds": [7, 9, 5],
    }
    assert g.parameters == 1007  # the first run's: the runs differ only in seed
    assert g.signature("bleu") == "C"  # the first converged run that has one; a diverged run's is skipped
    assert g.signature("chrf") is None
    no_seed = Run("x", {"encoder_layers": 6}, {"status": "completed"}, None)
    assert SeedGroup("g", "G", [no_seed]).info["seeds"] == [1]


def test_load_groups_and_members() -> None:
    runs = {n: _run(n, i, 30.0) for i, n in enumerate(["a", "b", "c"], 1)}
    groups = load_groups({"groups": {"g": {"runs": ["a", "c"], "label": "Gee"}, "h": {"runs": ["b"]}}}, runs)
    assert [r.name for r in groups["g"].members] == ["a", "c"] and groups["g"].label == "Gee"
    assert groups["h"].label == "h" and groups["h"].name == "h"
    assert load_groups({}, runs) == {}
    with pytest.raises(InputError, match=r"seed group 'g' names runs it does not list: \['z'\]"):
        load_groups({"groups": {"g": {"runs": ["a", "z"]}}}, runs)
    assert [r.name for r in members([runs["b"], groups["g"], runs["a"]])] == ["b", "a", "c", "a"]
