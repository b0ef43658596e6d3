"""``results/tables.md``: the papers' table shapes, every number read from the score files.

* Table 1 (Very Deep Transformers, Table 1): #param, T (TER, lower is better), M (METEOR), BLEU
  (tokenized, multi-bleu.perl convention), Δ BLEU against the baseline, plus sacreBLEU.
* Table 2/4-style comparisons: architecture columns (layers, width, residual variant, init, BT),
  #param and updates trained, the configured metrics, Δ against the comparison's baseline.
* Table 3: the pairwise paired-bootstrap matrix (+ / - / =).

A run whose training diverged shows "diverged" instead of numbers. † marks a system whose score on
the table's tested metric (its ``metric``: sacreBLEU unless set) differs significantly from the
table's baseline (paired bootstrap, p < alpha), on that metric's column; the p-values and every
metric's sacreBLEU-style signature are listed under each table. A system below the translation floor
(``evaluation.translation_floor``, BLEU 1.0) gets no mark and no claim; a table where no system
reaches it leads with dev perplexity. Each table states its decoding (beam, lenpen), and, where the
config gives the paper's numbers (``tables.<table>.paper``), shows them beside ours.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pipeline_lib.divergence.rule import CLAUSE_WORDS
from pipeline_lib.evaluate.metric_registry import default_columns, metric_header, metric_spec, metric_words
from pipeline_lib.letters import system_letters
from pipeline_lib.report import decoding, hyperparameters
from pipeline_lib.report.inputs import Run, load_run, read_json
from pipeline_lib.report.labels import layout_label, model_label
from pipeline_lib.report.marks import (
    DAGGER,
    DEFAULT_FLOOR,
    Floor,
    Significance,
    paper_entries,
    table_metric,
)
from pipeline_lib.report.paper import DEFAULT_TOLERANCE, PaperColumns
from pipeline_lib.report.seed_groups import Row, SeedGroup, load_groups, members
from pipeline_lib.report.table_registry import instances

__all__ = ["DAGGER", "Significance", "model_label", "render", "render_comparison", "render_table1"]


def _optional(metric: str) -> bool:
    """Scored only from inputs a run may lack (the tokenized pair, the generate file)."""
    spec = metric_spec(metric)
    return spec.pair or spec.generate


def fmt(value: float | None, decimals: int = 1) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


def metric_cell(run: Row, metric: str, mark: str = "") -> str:
    """A metric cell: the run's value and its mark, or a seed group's mean ± std (no mark: the paired
    bootstrap tests single runs)."""
    return run.cell(metric) if isinstance(run, SeedGroup) else fmt(run.metric(metric)) + mark


def fmt_params(n: int | None) -> str:
    if n is None:
        return "–"
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M" if n < 1e8 else f"{n / 1e6:.0f}M"
    return f"{n / 1e3:.0f}K"


def fmt_updates(run: Row) -> str:
    """Updates trained (for a diverged run: the update it stopped at), so budgets are visible."""
    update = run.status.get("update")
    return "–" if update is None else f"{int(update):,}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _signatures(runs: list[Row], metrics: list[str]) -> list[str]:
    lines = []
    for metric in metrics:
        sigs = sorted({s for r in members(runs) if not r.diverged for s in [r.signature(metric)] if s})
        for sig in sigs:
            lines.append(f"- {metric_header(metric)} `{sig}`")
    return lines


def _diverged_notes(runs: list[Row]) -> list[str]:
    out = []
    for r in members(runs):
        if r.diverged:
            st = r.status
            clause = st.get("criterion")
            out.append(
                f"- {model_label(r)} (`{r.name}`): training diverged at update {st.get('update')}, "
                f"epoch {st.get('epoch')}"
                + (f" ({CLAUSE_WORDS.get(clause, clause)})" if clause else "")
                + f": {st.get('reason')}"
            )
    return out


def dev_perplexity(run: Row) -> float | None:
    """The trainer's last validation (status.json), also for a run stopped as diverged."""
    return (run.status.get("valid") or {}).get("ppl")


def curve_values(points: list[tuple[int, float]], marks: int = 5) -> list[float | None]:
    """The last logged training perplexity at each fifth of the run."""
    if not points:
        return []
    last = points[-1][0]
    values = []
    for k in range(1, marks + 1):
        before = [ppl for update, ppl in points if update <= last * k / marks]
        values.append(before[-1] if before else None)
    return values


def curve_cell(points: list[tuple[int, float]], marks: int = 5) -> str:
    """A learning curve in a table cell: the last logged training perplexity at each fifth of the run."""
    values = curve_values(points, marks)
    return " · ".join("–" if v is None else f"{v:.0f}" for v in values) if values else "–"


def row_curve_cell(run: Row) -> str:
    """A run's curve cell; a seed group's: the mean over its converged runs at each fifth."""
    if not isinstance(run, SeedGroup):
        return curve_cell(run.train_points)
    curves = [c for c in (curve_values(r.train_points) for r in run.converged) if c]
    if not curves:
        return "–"
    means = [None if None in col else sum(col) / len(col) for col in zip(*curves, strict=True)]
    return " · ".join("–" if v is None else f"{v:.0f}" for v in means)


def seeds_note(rows: list[Row]) -> str:
    """Say how many training runs stand behind each row, so a difference is not read past its evidence."""
    groups = [r for r in rows if isinstance(r, SeedGroup)]
    if groups:
        return (
            "A row over seeds shows mean ± sample standard deviation (n − 1) over its runs that converged "
            "(n = how many; a diverged run is counted, not averaged); Δ and Δ paper compare that mean, and its "
            "perplexities are the mean over the same runs. "
            "Seeds: "
            + "; ".join(f"{model_label(g)} {', '.join(str(s) for s in g.info['seeds'])}" for g in groups)
            + ". No † on such a row: the paired bootstrap tests one run's output, not the seed variance "
            "(tables.significance compares single runs)."
        )
    seeds = sorted({int(r.info.get("seed", 1)) for r in rows})
    if len(seeds) == 1:
        return (
            f"Each row is one training run (seed {seeds[0]}): a difference between rows is not checked "
            "across seeds; the significance marks test the test set, not the training's variance."
        )
    return f"Seeds: {', '.join(str(s) for s in seeds)} (one training run per row)."


def _delta(run: Row, base: Row, metric: str) -> str:
    if run is base:
        return "–"
    a, b = run.metric(metric), base.metric(metric)
    if a is None or b is None:
        return "–"
    return f"{a - b:+.1f}"


def table_settings(spec: dict[str, Any] | None) -> tuple[float, float]:
    """(translation floor, paper tolerance) of the report (config ``evaluation``), or the defaults."""
    spec = spec or {}
    return spec.get("translation_floor", DEFAULT_FLOOR), spec.get("paper_tolerance", DEFAULT_TOLERANCE)


def _footnotes(rows: list[Row], base: Row, sig: Significance, paper: PaperColumns) -> list[str]:
    """What stands under every table: decoding, significance, paper, divergences."""
    lines = []
    dec = decoding.note(rows)
    if dec:
        lines += ["", dec]
    note = sig.note(rows, model_label(base))
    if note:
        lines += ["", note]
    paper_notes = paper.notes(rows)
    if paper_notes:
        lines += ["", *paper_notes]
    lines += ["", *_diverged_notes(rows)] if any(r.diverged for r in members(rows)) else []
    return lines


def lead_with_perplexity(rows: list[Row], floor: Floor) -> list[str]:
    """Above a table where no system translates: say so, and give the measure that does apply (dev
    perplexity, best first) before any BLEU column is read. The table's columns stay as they are."""
    if not floor.all_below(rows):
        return []
    ppl = sorted((p, model_label(r), r.diverged) for r in rows for p in [dev_perplexity(r)] if p is not None)
    ranked = ", ".join(f"{label} {p:.0f}" + (" (diverged)" if div else "") for p, label, div in ppl)
    return [floor.lead_note() + (f" Dev perplexity, best first: {ranked}." if ranked else ""), ""]


def render_table1(spec: dict[str, Any], runs: dict[str, Row], sig: Significance) -> list[str]:
    t1 = spec["tables"]["table1"]
    base = runs[t1["baseline"]]
    names = list(dict.fromkeys([t1["baseline"], *t1["rows"]]))
    rows = [runs[n] for n in names]
    floor_value, tolerance = table_settings(spec)
    bleu = table_metric(t1)  # the tested metric is the BLEU column, and the column that carries †
    floor = Floor(floor_value, bleu)
    sig = sig.against(base, rows, floor)
    other = "tok_bleu" if bleu == "bleu" else "bleu"  # the other BLEU in the last column
    paper = PaperColumns(paper_entries(t1.get("paper"), bleu), bleu, tolerance)
    title = t1.get("title", "Table 1")
    lines = [f"## {title}", ""]
    header = [
        "Model",
        "#param",
        "T↓",
        "M↑",
        "chrF2↑",
        metric_header(bleu),
        "Δ",
        "sacreBLEU↑" if other == "bleu" else "BLEU↑ (tok)",
    ]
    lines += lead_with_perplexity(rows, floor)
    dev_ppl = bool(t1.get("dev_ppl"))
    if dev_ppl:
        header[2:2] = ["Train ppl at 20/40/60/80/100% of its updates", "Dev ppl↓"]
    if paper.active:
        header += paper_header(bleu)
    trained_differently = hyperparameters.differing(rows)
    if trained_differently:
        header.append(hyperparameters.HEADER)
    dec_column = decoding.varies(rows)
    if dec_column:
        header.append(decoding.HEADER)
    lines += [_row(header), _row([":---"] + ["---:"] * (len(header) - 1))]
    for run in rows:
        if run.diverged:
            cells = [model_label(run), fmt_params(run.parameters), "", "", "", "diverged", "", "diverged"]
        else:
            cells = [
                model_label(run),
                fmt_params(run.parameters),
                metric_cell(run, "ter"),
                metric_cell(run, "meteor"),
                metric_cell(run, "chrf"),
                metric_cell(run, bleu, sig.mark(run.name) if sig.metric == bleu else ""),
                _delta(run, base, bleu),
                metric_cell(run, other, sig.mark(run.name) if sig.metric == other else ""),
            ]
        if dev_ppl:
            cells[2:2] = [row_curve_cell(run), fmt(dev_perplexity(run), 0)]
        if paper.active:
            cells += paper.cells(run)
        if trained_differently:
            cells.append(hyperparameters.cell(run, trained_differently))
        if dec_column:
            cells.append("–" if run.diverged else decoding.cell(run))
        lines.append(_row(cells))
    lines.append("")
    lines.append(
        f"T: TER, M: METEOR, chrF2: character n-gram F-score (β = 2), BLEU: {metric_spec(bleu).definition or metric_words(bleu)}; "
        f"Δ: BLEU difference against {model_label(base)}. Split: {spec['split']}."
        + (
            " Train ppl: the training perplexity logged at 20%, 40%, ... of the run's updates (the curve "
            "itself is plots/learning_curves.png); dev ppl: perplexity on the development set at the last "
            "update."
            if dev_ppl
            else ""
        )
    )
    lines += ["", seeds_note(rows)]
    lines += _footnotes(rows, base, sig, paper)
    lines += [
        "",
        "Signatures:",
        *_signatures(rows, list(dict.fromkeys([bleu, "tok_bleu", "bleu", "ter", "meteor", "chrf"]))),
        "",
    ]
    return lines


def paper_header(metric: str) -> list[str]:
    return [f"Paper {metric_spec(metric).label}", "Δ paper"]


def render_comparison(
    comp: dict[str, Any], runs: dict[str, Row], sig: Significance, spec: dict[str, Any] | None = None
) -> list[str]:
    base_name = comp.get("baseline", comp["rows"][0])
    names = list(dict.fromkeys([base_name, *comp["rows"]]))
    rows = [runs[n] for n in names]
    base = runs[base_name]
    floor_value, tolerance = table_settings(spec)
    tested = table_metric(comp)  # the Δ column and the column that carries †
    floor = Floor(floor_value, tested)
    sig = sig.against(base, rows, floor)
    metrics = comp.get("metrics") or default_columns()
    # a metric scored only from optional inputs has no column where no row has it
    metrics = [m for m in metrics if not _optional(m) or any(r.metric(m) is not None for r in rows)]
    if tested not in metrics:
        metrics.append(tested)  # the tested metric always has a column for its marks
    paper = PaperColumns(paper_entries(comp.get("paper"), tested), tested, tolerance)
    dec_column = decoding.varies(rows)
    lines = [f"## {comp.get('title', comp['name'])}", "", *lead_with_perplexity(rows, floor)]
    header = ["Model", "Enc", "Dec", "Width", "Residual", "Init", "BT", "#param", "Updates"]
    header += [metric_header(m) for m in metrics] + ["Δ"]
    header += paper_header(tested) if paper.active else []
    trained_differently = hyperparameters.differing(rows)
    header += [hyperparameters.HEADER] if trained_differently else []
    header += [decoding.HEADER] if dec_column else []  # last: the metric columns keep their places
    lines += [_row(header), _row([":---"] + ["---:"] * 2 + [":---:"] * 4 + ["---:"] * (len(header) - 7))]
    for run in rows:
        info = run.info
        cells = [
            model_label(run),
            str(info["encoder_layers"]),
            str(info["decoder_layers"]),
            str(info.get("width", "")),
            layout_label(info),
            info.get("init", "xavier"),
            "yes" if info.get("backtranslation") else "no",
            fmt_params(run.parameters),
            fmt_updates(run),
        ]
        if run.diverged:
            cells += ["diverged"] * len(metrics) + ["–"]
        else:
            for m in metrics:
                cells.append(metric_cell(run, m, sig.mark(run.name) if m == sig.metric else ""))
            cells.append(_delta(run, base, tested))
        if paper.active:
            cells += paper.cells(run)
        if trained_differently:
            cells.append(hyperparameters.cell(run, trained_differently))
        if dec_column:
            cells.append("–" if run.diverged else decoding.cell(run))
        lines.append(_row(cells))
    lines.append("")
    lines.append(f"Δ: {metric_header(tested)} difference against {model_label(base)}.")
    lines += _footnotes(rows, base, sig, paper)
    lines += ["", "Signatures:", *_signatures(rows, metrics), ""]
    return lines


def _against_paper(ours: str, published: str | None) -> tuple[str, bool | None]:
    """A cell with the paper's mark beside ours where they differ; whether they agree (None: no claim)."""
    if published is None or ours in ("", "·"):
        return ours, None
    return (ours, True) if ours == published else (f"{ours} [paper {published}]", False)


def render_matrix(
    title: str,
    path: str,
    runs: dict[str, Run],
    floor_value: float = DEFAULT_FLOOR,
    paper: dict[str, Any] | None = None,
) -> list[str]:
    data = read_json(path)
    lines = [f"## {title}", ""]
    for metric, pw in data.get("pairwise", {}).items():
        names = pw["systems"]
        letters = system_letters(len(names))
        floor = Floor(floor_value, metric)
        diverged = {i for i, n in enumerate(names) if n in runs and runs[n].diverged}
        below = {i for i, n in enumerate(names) if n in runs and floor.below(runs[n])}
        header = ["Model", metric_header(metric).rstrip("↑↓"), *letters]
        agreement: list[bool] = []
        lines += [_row(header), _row([":---", ":---:", *[":---:"] * len(names)])]
        for i, name in enumerate(names):
            label = model_label(runs[name]) if name in runs else name
            if i in diverged:
                cells = ["diverged" if j != i else "" for j in range(len(names))]
                score = "diverged"
            else:
                cells = []
                for j in range(len(names)):
                    ours = "" if j == i else ("·" if {i, j} & (diverged | below) else pw["matrix"][i][j])
                    published = paper["matrix"][i][j] if paper and j != i else None
                    cell, agrees = _against_paper(ours, published)
                    cells.append(cell)
                    if agrees is not None:
                        agreement.append(agrees)
                score = f"{pw['scores'][i]:.1f}"
            lines.append(_row([f"{letters[i]}:{label}", score, *cells]))
        lines.append("")
        if paper:
            lines.append(
                f"Against the published matrix ({paper['source']}): {sum(agreement)} of {len(agreement)} "
                "compared cells agree; where they differ, the paper's mark follows ours in brackets."
            )
            lines.append("")
        lines.append(
            f"Cell (i, j): row i significantly better (+), worse (-) or not different (=) than column j "
            f"(paired bootstrap, {data.get('n_samples')} resamples, p < {pw['alpha']}); "
            f"· = compared with a diverged run or one below {floor.words} (no claim: the paired bootstrap "
            f"compares noise there). `{pw['signature']}`"
        )
        lines.append("")
    return lines


# The table kinds' renderers (pipeline_lib.report.table_registry):
# (report spec, table, runs, its significance JSON or None) -> markdown lines.
def table1_section(
    spec: dict[str, Any], table: dict[str, Any], runs: dict[str, Row], sig: str | None
) -> list[str]:
    return render_table1(spec, runs, Significance(sig, table_metric(table)))


def comparison_section(
    spec: dict[str, Any], table: dict[str, Any], runs: dict[str, Row], sig: str | None
) -> list[str]:
    return render_comparison(table, runs, Significance(sig, table_metric(table)), spec)


def matrix_section(
    spec: dict[str, Any], table: dict[str, Any], runs: dict[str, Run], sig: str | None
) -> list[str]:
    if sig is None:  # no pairwise matrix was computed
        return []
    return render_matrix(
        table.get("title", "Table 3"), sig, runs, table_settings(spec)[0], paper=table.get("paper")
    )


def render_data(metas: dict[str, str | list[str]]) -> list[str]:
    """Per dataset and split: pairs in, kept, removed by filter, and the cleaning warning (each dataset
    has two preprocess markers, the training side and the test split, and apply-bpe's where it cleans
    on subwords: its rows read ``train (after BPE)``)."""
    if not metas:
        return []
    lines = ["## Data", "", "| dataset | split | pairs in | kept | removed | by filter |", "| :--- | :--- | ---: | ---: | ---: | :--- |"]  # fmt: skip
    warnings = []
    for ds, paths in metas.items():
        paths = [paths] if isinstance(paths, str) else paths  # one marker (an older spec) or several
        splits = {}
        for path in paths:
            meta = read_json(path)
            after = " (after BPE)" if meta.get("stage") == "apply-bpe" else ""
            splits.update({f"{k}{after}": v for k, v in meta.get("splits", {}).items()})
        for split, st in splits.items():
            removed = st["input"] - st["kept"]
            share = f" ({100 * removed / st['input']:.0f}%)" if st["input"] else ""
            by = ", ".join(f"{k} {v:,}" for k, v in st.get("removed", {}).items()) or "–"
            lines.append(_row([ds, split, f"{st['input']:,}", f"{st['kept']:,}", f"{removed:,}{share}", by]))
            if st.get("warning"):
                warnings.append(f"- **Warning** ({ds}): {st['warning']}.")
    return [*lines, "", *warnings, *([""] if warnings else [])]


def rerun_command(spec: dict[str, Any]) -> str:
    """The command that rebuilds the tables, with the config files the run was given (the target
    first: ``--configfile`` takes every word after it as a file), from any directory: ``cd`` into the
    run's working directory (the config paths are relative to it), ``-s`` when the Snakefile is not
    there."""
    cmd = "snakemake"
    workdir, snakefile = spec.get("workdir"), spec.get("snakefile")
    if snakefile and workdir and Path(snakefile) != Path(workdir) / "Snakefile":
        cmd += f" -s {shlex.quote(snakefile)}"
    cmd += f" {spec.get('tables_path', 'results/tables.md')}"
    files = spec.get("configfiles") or []
    cmd += " --configfile " + " ".join(shlex.quote(f) for f in files) if files else ""
    return f"cd {shlex.quote(workdir)} && {cmd}" if workdir else cmd


def render(spec: dict[str, Any]) -> str:
    runs: dict[str, Row] = {name: load_run(name, info) for name, info in spec["experiments"].items()}
    runs.update(load_groups(spec, runs))  # a row naming a seed group: mean ± std over its runs
    tables = spec["tables"]
    sig_paths = spec.get("significance", {})
    lines = [
        "# Results",
        "",
        f"Generated by `python -m pipeline_lib report` from the score files of the workflow "
        f"(split: {spec['split']}). Do not edit: rerun `{rerun_command(spec)}`.",
        "",
    ]
    for table in instances(tables, tabled=True):
        lines += table.kind.renderer()(spec, table.table, runs, sig_paths.get(table.name))
    lines += render_data(spec.get("data", {}))
    lines += ["## Sources", ""]
    for name, info in spec["experiments"].items():
        lines.append(f"- `{name}`: {model_label(runs[name])}: `{info['score']}`, `{info['status']}`")
    return "\n".join(lines).rstrip() + "\n"
