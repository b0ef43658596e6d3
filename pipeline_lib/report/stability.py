"""The stability map: the Admin paper's Figure 10 grid (learning rate x Adam beta2, no warm-up), one
panel per method and depth, each cell the fraction of seeds that converged, their dev perplexity and,
where the grid is decoded (``stability_map.decode``), their test BLEU, as the paper's figure shows.

The verdict is the trainer's (``status.json``: the divergence rule of
:mod:`pipeline_lib.divergence.rule`, the same rule the tables use); this module only reads and draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.atomic import write_text
from pipeline_lib.divergence.rule import CLAUSE_WORDS
from pipeline_lib.model.registry import residual_label
from pipeline_lib.report.inputs import read_json, read_train_log


@dataclass(frozen=True)
class Seed:
    seed: int
    status: str  # completed | diverged | ...
    criterion: str | None
    update: int | None
    dev_ppl: float | None
    final_train_nll: float | None  # bits/token, the last logged interval
    threshold_bits: float | None  # the divergence threshold the trainer judged this run against
    bleu: float | None = None  # the scored split's BLEU (tokenized where scored so), None if not decoded

    @property
    def converged(self) -> bool:
        return self.status == "completed"


Cell = tuple[str, str, float, float]  # method, depth, lr, beta2


def read_grid(stab: dict[str, Any]) -> dict[Cell, list[Seed]]:
    grid: dict[Cell, list[Seed]] = {}
    for run in stab["runs"].values():
        status = read_json(run["status"])
        valid = status.get("valid") or {}
        log_path = run.get("train_log")
        points = read_train_log(log_path).train_points if log_path and Path(log_path).is_file() else []
        score_path = run.get("score")
        score = read_json(score_path) if score_path and Path(score_path).is_file() else {}
        seed = Seed(
            seed=int(run.get("seed", 1)),
            status=status.get("status", "?"),
            criterion=status.get("criterion"),
            update=status.get("update"),
            dev_ppl=valid.get("ppl"),
            final_train_nll=math.log2(points[-1][1]) if points else None,
            threshold_bits=status.get("divergence_threshold_bits"),
            bleu=score_bleu(score),
        )
        key = (run["method"], run["depth"], float(run["lr"]), float(run.get("beta2", math.nan)))
        grid.setdefault(key, []).append(seed)
    for seeds in grid.values():
        seeds.sort(key=lambda s: s.seed)
    return grid


BLEU_KEYS = ("tok_bleu", "bleu")  # the figure's metric is fairseq-generate's (tokenized) BLEU


def score_bleu(score: dict[str, Any]) -> float | None:
    """A score file's BLEU, tokenized if it has it (a diverged run's placeholder has none)."""
    scores = score.get("scores") or {}
    key = next((k for k in BLEU_KEYS if k in scores), None)
    return None if key is None else float(scores[key]["score"])


def decoded(stab: dict[str, Any]) -> bool:
    return any(run.get("score") for run in stab["runs"].values())


def _axes(stab: dict[str, Any]) -> tuple[list[str], list[str], list[float], list[float]]:
    betas = [float(b) for b in stab.get("betas2") or [math.nan]]
    return stab["methods"], stab["depths"], [float(x) for x in stab["lrs"]], betas


def _ppl(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.0f}"


def cell_text(seeds: list[Seed]) -> str:
    ok = sum(s.converged for s in seeds)
    parts = []
    for s in seeds:
        if s.converged:
            parts.append(_ppl(s.dev_ppl) + ("" if s.bleu is None else f", BLEU {s.bleu:.2f}"))
        else:
            parts.append(f"{CLAUSE_WORDS.get(s.criterion or '', s.status)} at {s.update} ({_ppl(s.dev_ppl)})")
    head = f"**{ok}/{len(seeds)}**" if ok < len(seeds) else f"{ok}/{len(seeds)}"
    return f"{head}: " + ", ".join(parts)


def _beta_label(beta2: float) -> str:
    return "recipe β2" if math.isnan(beta2) else f"β2 {beta2:g}"


def render_markdown(stab: dict[str, Any], grid: dict[Cell, list[Seed]]) -> str:
    methods, depths, lrs, betas = _axes(stab)
    rule = stab.get("rule", {})
    lines = [
        "# Stability map (the Admin paper's Figure 10)",
        "",
        stab.get("setup", ""),
        "",
        "Cell: converged seeds / seeds, then each seed's dev perplexity at its last update"
        + (", and its test BLEU (tokenized where the config scores it so)" if decoded(stab) else "")
        + "; a diverged seed shows the clause that fired, the update, and its dev perplexity in brackets. "
        f"Diverged ({rule.get('text', 'the trainer divergence rule')}): the same rule as the tables. "
        + (
            ""
            if decoded(stab)
            else "BLEU is not reported (stability_map.decode is off): dev perplexity is the measure."
        ),
        "",
    ]
    for method in methods:
        for depth in depths:
            seeds = [s for lr in lrs for b in betas for s in grid.get((method, depth, lr, b), [])]
            ok = sum(s.converged for s in seeds)
            label = f"{residual_label(method)}, {depth.replace('-', 'L-')}L"
            lines += [f"## {label}: {ok} of {len(seeds)} runs converged{paper_count(stab, method)}", ""]
            lines.append("| lr | " + " | ".join(_beta_label(b) for b in betas) + " |")
            lines.append("| :--- | " + " | ".join(":---" for _ in betas) + " |")
            for lr in lrs:
                cells = [cell_text(grid.get((method, depth, lr, b), [])) for b in betas]
                lines.append(f"| {lr:g} | " + " | ".join(cells) + " |")
            lines.append("")
    lines += final_loss_section(stab, grid)
    return "\n".join(lines)


def paper_count(stab: dict[str, Any], method: str) -> str:
    """The published count beside the map's own, as converged of runs (``stability_map.paper``)."""
    entry = (stab.get("paper") or {}).get(method)
    if not entry:
        return ""
    converged = entry["of"] - entry["diverged"]
    return f" (paper: {converged} of {entry['of']}, {entry['source']})"


def final_loss_section(stab: dict[str, Any], grid: dict[Cell, list[Seed]]) -> list[str]:
    """Every run's last logged training nll, sorted, per method: how far apart the two outcomes lie."""
    threshold = stab.get("rule", {}).get("threshold_bits")
    lines = ["## Final training nll of every run (bits/token, sorted; **bold**: diverged)", ""]
    if threshold is not None:
        lines += [f"Threshold: {threshold:.3f} bits/token.", ""]
    lines += ["| method | final training nll |", "| :--- | :--- |"]
    for method in stab["methods"]:
        seeds = [
            s for (m, *_), ss in grid.items() if m == method for s in ss if s.final_train_nll is not None
        ]
        seeds.sort(key=lambda s: s.final_train_nll or 0.0)
        values = [
            f"**{s.final_train_nll:.2f}**" if not s.converged else f"{s.final_train_nll:.2f}" for s in seeds
        ]
        lines.append(f"| {residual_label(method)} | {' '.join(values)} |")
    lines.append("")
    return lines


PANELS_PER_ROW = 6  # the eleven-method map wraps onto two rows


def draw(stab: dict[str, Any], grid: dict[Cell, list[Seed]], path: str) -> None:
    from pipeline_lib.report.figures import plt, save_figure

    methods, depths, lrs, betas = _axes(stab)
    panels = [(m, d) for d in depths for m in methods]
    columns = min(len(panels), PANELS_PER_ROW)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(2.9 * columns + 1.2, (0.5 * len(lrs) + 2.2) * rows), dpi=120, squeeze=False
    )
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (method, depth) in zip(axes.flat, panels, strict=False):
        frac = [
            [_fraction(grid.get((method, depth, lr, b), [])) for b in betas] for lr in lrs
        ]  # rows: lr, columns: beta2, as the paper's figure
        ax.imshow(frac, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
        for i, lr in enumerate(lrs):
            for j, b in enumerate(betas):
                seeds = grid.get((method, depth, lr, b), [])
                ok = sum(s.converged for s in seeds)
                ppls = [s.dev_ppl for s in seeds if s.converged and s.dev_ppl is not None]
                bleus = [s.bleu for s in seeds if s.converged and s.bleu is not None]
                text = f"{ok}/{len(seeds)}" + (f"\n{sum(ppls) / len(ppls):.0f}" if ppls else "")
                text += f"\nBLEU {sum(bleus) / len(bleus):.1f}" if bleus else ""
                ax.text(j, i, text, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(betas)))
        ax.set_xticklabels([_beta_label(b).replace("β2 ", "") for b in betas])
        ax.set_yticks(range(len(lrs)))
        ax.set_yticklabels([f"{lr:g}" for lr in lrs])
        ax.set_xlabel("Adam β2")
        ax.set_title(f"{residual_label(method)} {depth.replace('-', 'L-')}L", fontsize=9)
    for row in axes:
        row[0].set_ylabel("learning rate")
    fig.suptitle(
        f"Stability map, {stab['max_update']} updates, no warm-up: converged seeds / seeds, "
        "mean dev perplexity" + (" and BLEU" if decoded(stab) else "") + " of the converged",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, path)


def _fraction(seeds: list[Seed]) -> float:
    return sum(s.converged for s in seeds) / len(seeds) if seeds else math.nan


def stability_map(spec: dict[str, Any], plot_path: str, table_path: str | None = None) -> None:
    stab = spec.get("stability")
    if not stab:
        raise ValueError("the report spec has no stability map (config key stability_map)")
    grid = read_grid(stab)
    if "threshold_bits" not in stab.get("rule", {}):
        thresholds = {s.threshold_bits for seeds in grid.values() for s in seeds} - {None}
        if len(thresholds) == 1:  # the same data and setting: one threshold for the whole grid
            stab = {**stab, "rule": {**stab.get("rule", {}), "threshold_bits": thresholds.pop()}}
    draw(stab, grid, plot_path)
    if table_path:
        write_text(table_path, render_markdown(stab, grid))
