"""Paired bootstrap resampling exactly as ``sacrebleu --paired-bs`` (Koehn 2004), via sacrebleu's own
``PairedTest``, plus the pairwise +/-/= matrix of the paper's Table 3.

sacrebleu draws the resample indices from ``numpy.random.default_rng(seed)`` once per comparison, so
the same seed gives the same 1000 resamples for every (baseline, system) pair, and the statistic
|score_sys - score_bl| is symmetric: p(A, B) == p(B, A). The matrix therefore needs N(N-1)/2 tests.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

from pipeline_lib.errors import ConfigError
from pipeline_lib.evaluate.metric_registry import metric_spec, testable_names
from pipeline_lib.letters import system_letters


# The reference statistics are cached inside the metric object, as the sacrebleu CLI does.
# The registry's ``paired`` entry points (pipeline_lib.evaluate.metric_registry): refs -> metric.
def paired_sacre_bleu(refs: Sequence[str]) -> BLEU:
    return BLEU(references=[list(refs)])


def paired_tokenized_bleu(refs: Sequence[str]) -> BLEU:
    """multi-bleu.perl on pre-tokenized text, as metrics.tokenized_bleu (also the compound-split views)."""
    return BLEU(tokenize="none", smooth_method="none", force=True, references=[list(refs)])


def paired_chrf(refs: Sequence[str]) -> CHRF:
    return CHRF(references=[list(refs)])


def paired_ter(refs: Sequence[str]) -> TER:
    return TER(references=[list(refs)])


def _make_metric(name: str, refs: Sequence[str]):
    if name not in testable_names():
        raise ConfigError(f"metrics: unknown metric {name!r} (choose from {sorted(testable_names())})")
    return metric_spec(name).paired_metric(refs)


class _SacrebleuSeed:
    """PairedTest reads its seed from SACREBLEU_SEED (also for the baseline's CI): set it only for the
    duration of the test, so the caller's environment is left as it was. A class, not a
    ``@contextmanager``: mutmut leaves decorated functions unmutated (docs/mutation.md)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.old: str | None = None

    def __enter__(self) -> None:
        self.old = os.environ.get("SACREBLEU_SEED")
        os.environ["SACREBLEU_SEED"] = str(self.seed)

    def __exit__(self, *exc: object) -> None:
        if self.old is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = self.old


def validate(n_samples: int, seed: int) -> None:
    if n_samples < 1:
        raise ConfigError(f"n_samples: must be >= 1, got {n_samples}")
    # sacrebleu treats seed 0 as "unseeded" (``seed if seed else None``): refuse it, results must repeat.
    if seed < 1:
        raise ConfigError(f"seed: must be a positive integer (sacrebleu treats 0 as unseeded), got {seed}")


def paired_bootstrap(
    named_systems: Sequence[tuple[str, Sequence[str]]],
    refs: Sequence[str],
    metric: str = "bleu",
    *,
    n_samples: int = 1000,
    seed: int = 12345,
) -> dict[str, Any]:
    """Baseline = ``named_systems[0]``. Returns the signature and one entry per system (the baseline
    first, with ``p_value`` None) holding score, bootstrap mean, 95% CI half-width and p-value."""
    validate(n_samples, seed)
    if len(named_systems) < 2:
        raise ConfigError("systems: a paired test needs a baseline and at least one system")
    with _SacrebleuSeed(seed):
        test = PairedTest(
            [(name, list(hyps)) for name, hyps in named_systems],
            {metric: _make_metric(metric, refs)},
            references=None,
            test_type="bs",
            n_samples=n_samples,
        )
        signatures, scores = test()
    (metric_name,) = [k for k in scores if k != "System"]
    results = []
    for name, res in zip(scores["System"], scores[metric_name], strict=True):
        results.append(
            {
                "name": name,
                "score": float(res.score),
                "mean": float(res.mean),
                "ci": float(res.ci),
                "p_value": None if res.p_value is None else float(res.p_value),
            }
        )
    return {"metric": metric, "signature": signatures[metric_name].format(), "results": results}


def sign(score_row: float, score_col: float, p_value: float, metric: str, alpha: float) -> str:
    """'+' if the row system is significantly better than the column system, '-' if worse, '=' if not
    significantly different at level ``alpha``."""
    if p_value >= alpha or score_row == score_col:
        return "="
    row_better = score_row > score_col if metric_spec(metric).higher_is_better else score_row < score_col
    return "+" if row_better else "-"


def pairwise_matrix(
    named_systems: Sequence[tuple[str, Sequence[str]]],
    refs: Sequence[str],
    metric: str = "bleu",
    *,
    n_samples: int = 1000,
    seed: int = 12345,
    alpha: float = 0.05,
    progress=None,
    first_row: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every ordered pair (row i, column j): p-value and '+', '-' or '=' for row vs column.

    ``first_row``: the :func:`paired_bootstrap` result of system 0 against all others, if already
    computed (the vs-baseline test is exactly that row), so it is not run twice."""
    n = len(named_systems)
    if n < 2:
        raise ConfigError("systems: the pairwise matrix needs at least two systems")
    p_values: list[list[float | None]] = [[None] * n for _ in range(n)]
    scores: list[float] = [0.0] * n
    signature = ""
    for i in range(n - 1):
        # System i as baseline against every later system: one PairedTest shares i's statistics.
        if i == 0 and first_row is not None:
            out = first_row
        else:
            out = paired_bootstrap(named_systems[i:], refs, metric, n_samples=n_samples, seed=seed)
        signature = out["signature"]
        scores[i] = out["results"][0]["score"]
        for k, res in enumerate(out["results"][1:], start=i + 1):
            scores[k] = res["score"]
            p_values[i][k] = p_values[k][i] = res["p_value"]
        if progress is not None:
            progress(i + 1, n - 1)
    matrix = [
        ["" if i == j else sign(scores[i], scores[j], p_values[i][j], metric, alpha) for j in range(n)]
        for i in range(n)
    ]
    return {
        "metric": metric,
        "signature": signature,
        "alpha": alpha,
        "systems": [name for name, _ in named_systems],
        "scores": scores,
        "p_values": p_values,
        "matrix": matrix,
    }


def render_matrix_markdown(pairwise: dict[str, Any], *, decimals: int = 1) -> str:
    """Markdown table in the layout of the paper's Table 3: rows 'a:name', a score column, then one
    column per system letter; cell (i, j) says whether row i beats (+), loses to (-) or ties (=) j."""
    names = pairwise["systems"]
    letters = system_letters(len(names))
    header = ["Model", pairwise["metric"].upper() if pairwise["metric"] != "chrf" else "chrF2", *letters]
    lines = [
        "| " + " | ".join(header) + " |",
        "| :--- | :---: | " + " | ".join(":---:" for _ in names) + " |",
    ]
    for i, name in enumerate(names):
        row = [f"{letters[i]}:{name}", f"{pairwise['scores'][i]:.{decimals}f}", *pairwise["matrix"][i]]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append(
        f"Cell (i, j): row i significantly better (+), worse (-) or not different (=) than column j, "
        f"paired bootstrap p < {pairwise['alpha']}; {pairwise['signature']}"
    )
    return "\n".join(lines) + "\n"
