"""``results/tables.md``: the papers' table shapes, every number read from the score files.

* Table 1 (Very Deep Transformers, Table 1): #param, T (TER, lower is better), M (METEOR), BLEU
  (tokenized, multi-bleu.perl convention), Δ BLEU against the baseline, plus sacreBLEU.
* Table 2/4-style comparisons: architecture columns (layers, width, residual variant, init, BT),
  #param and updates trained, the configured metrics, Δ against the comparison's baseline.
* Table 3: the pairwise paired-bootstrap matrix (+ / - / =).

A run whose training diverged shows "diverged" instead of numbers. † marks a system whose sacreBLEU
differs significantly from the table's baseline (paired bootstrap, p < alpha); the p-values and every
metric's sacreBLEU-style signature are listed under each table.
"""

from __future__ import annotations

from typing import Any

from pipeline_lib.diverged import CLAUSE_WORDS
from pipeline_lib.letters import system_letters
from pipeline_lib.model.registry import residual_label
from pipeline_lib.report.inputs import Run, load_run, read_json

METRIC_HEADERS = {
    "tok_bleu": "BLEU↑",
    "bleu": "sacreBLEU↑",
    "ter": "TER↓",
    "meteor": "METEOR↑",
    "chrf": "chrF2↑",
}
LOWER_IS_BETTER = {"ter"}
DAGGER = "†"


def model_label(run: Run) -> str:
    info = run.info
    if info.get("label") and info["label"] != run.name:
        return info["label"]
    depth = f"{info['encoder_layers']}L-{info['decoder_layers']}L"
    width = f"-{info['width']}" if info.get("width") and info["width"][0].isdigit() else ""
    init = " Lipschitz" if info.get("init") == "lipschitz" else ""
    bt = " + BT" if info.get("backtranslation") else ""
    return f"{depth}{width} {residual_label(info['residual'])}{init}{bt}"


def fmt(value: float | None, decimals: int = 1) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


def fmt_params(n: int | None) -> str:
    if n is None:
        return "–"
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M" if n < 1e8 else f"{n / 1e6:.0f}M"
    return f"{n / 1e3:.0f}K"


def fmt_updates(run: Run) -> str:
    """Updates trained (for a diverged run: the update it stopped at), so budgets are visible."""
    update = run.status.get("update")
    return "–" if update is None else f"{int(update):,}"


def bleu_metric(runs: list[Run], configured: str | None = None) -> str:
    """The table's configured metric; otherwise tokenized BLEU (the paper's Table 1) where computed."""
    if configured in ("bleu", "tok_bleu"):
        return configured
    if any(r.metric("tok_bleu") is not None for r in runs):
        return "tok_bleu"
    return "bleu"


class Significance:
    """vs-baseline results of one significance JSON for one metric (the table's), by system name."""

    def __init__(self, path: str | None, metric: str = "bleu") -> None:
        self.metric = metric
        self.rows: dict[str, dict[str, Any]] = {}
        self.data: dict[str, Any] | None = None
        self.diverged_baseline: str | None = None  # label of a diverged baseline: no marks at all
        if path is None:
            return
        self.data = read_json(path)
        block = self.data.get("vs_baseline", {}).get(metric)
        if block:
            for row in block["systems"]:
                self.rows[row["name"]] = row

    def against(self, base: Run) -> Significance:
        """No marks against a diverged baseline: its placeholder output is not a system."""
        if not base.diverged:
            return self
        empty = Significance(None, self.metric)
        empty.diverged_baseline = model_label(base)
        return empty

    def mark(self, name: str) -> str:
        row = self.rows.get(name)
        return DAGGER if row is not None and row.get("significant") else ""

    def note(self, runs: list[Run], baseline: str) -> str | None:
        if self.diverged_baseline is not None:
            return f"No significance marks: the baseline {self.diverged_baseline} diverged."
        if self.data is None:
            return None
        alpha = self.data.get("alpha", 0.05)
        parts = []
        for run in runs:
            row = self.rows.get(run.name)
            if row is None or run.diverged:
                continue
            direction = "better" if row.get("better") else "worse"
            sig = "significant" if row.get("significant") else "not significant"
            parts.append(f"{model_label(run)}: p = {row['p_value']:.4f} ({direction}, {sig})")
        if not parts:
            return None
        return (
            f"{DAGGER} {METRIC_NAMES[self.metric]} significantly different from {baseline} (paired bootstrap, "
            f"{self.data.get('n_samples')} resamples, seed {self.data.get('seed')}, p < {alpha}). "
            + "; ".join(parts)
            + "."
        )


METRIC_NAMES = {"bleu": "sacreBLEU", "tok_bleu": "tokenized BLEU", "chrf": "chrF2", "ter": "TER"}


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _signatures(runs: list[Run], metrics: list[str]) -> list[str]:
    lines = []
    for metric in metrics:
        sigs = sorted({s for r in runs if not r.diverged for s in [r.signature(metric)] if s})
        for sig in sigs:
            lines.append(f"- {METRIC_HEADERS.get(metric, metric)} `{sig}`")
    return lines


def _diverged_notes(runs: list[Run]) -> list[str]:
    out = []
    for r in runs:
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


def dev_perplexity(run: Run) -> float | None:
    """The trainer's last validation (status.json), also for a run stopped as diverged."""
    return (run.status.get("valid") or {}).get("ppl")


def curve_cell(points: list[tuple[int, float]], marks: int = 5) -> str:
    """A learning curve in a table cell: the last logged training perplexity at each fifth of the run."""
    if not points:
        return "–"
    last = points[-1][0]
    values = []
    for k in range(1, marks + 1):
        before = [ppl for update, ppl in points if update <= last * k / marks]
        values.append(f"{before[-1]:.0f}" if before else "–")
    return " · ".join(values)


def seeds_note(rows: list[Run]) -> str:
    """Say how many training runs stand behind each row, so a difference is not read past its evidence."""
    seeds = sorted({int(r.info.get("seed", 1)) for r in rows})
    if len(seeds) == 1:
        return (
            f"Each row is one training run (seed {seeds[0]}): a difference between rows is not checked "
            "across seeds; the significance marks test the test set, not the training's variance."
        )
    return f"Seeds: {', '.join(str(s) for s in seeds)} (one training run per row)."


def _delta(run: Run, base: Run, metric: str) -> str:
    if run is base:
        return "–"
    a, b = run.metric(metric), base.metric(metric)
    if a is None or b is None:
        return "–"
    return f"{a - b:+.1f}"


def render_table1(spec: dict[str, Any], runs: dict[str, Run], sig: Significance) -> list[str]:
    t1 = spec["tables"]["table1"]
    base = runs[t1["baseline"]]
    sig = sig.against(base)
    names = list(dict.fromkeys([t1["baseline"], *t1["rows"]]))
    rows = [runs[n] for n in names]
    bleu = bleu_metric(rows, t1.get("metric"))
    other = "bleu" if bleu == "tok_bleu" else "tok_bleu"  # the other BLEU in the last column
    title = t1.get("title", "Table 1")
    lines = [f"## {title}", ""]
    header = [
        "Model",
        "#param",
        "T↓",
        "M↑",
        "BLEU↑" if bleu == "tok_bleu" else "sacreBLEU↑",
        "Δ",
        "sacreBLEU↑" if other == "bleu" else "BLEU↑ (tok)",
    ]
    dev_ppl = bool(t1.get("dev_ppl"))
    if dev_ppl:
        header[2:2] = ["Train ppl at 20/40/60/80/100% of its updates", "Dev ppl↓"]
    lines += [_row(header), _row([":---"] + ["---:"] * (len(header) - 1))]
    for run in rows:
        if run.diverged:
            cells = [model_label(run), fmt_params(run.parameters), "", "", "diverged", "", "diverged"]
        else:
            cells = [
                model_label(run),
                fmt_params(run.parameters),
                fmt(run.metric("ter")),
                fmt(run.metric("meteor")),
                fmt(run.metric(bleu)) + (sig.mark(run.name) if sig.metric == bleu != "bleu" else ""),
                _delta(run, base, bleu),
                fmt(run.metric(other)) + (sig.mark(run.name) if sig.metric == other else ""),
            ]
        if dev_ppl:
            cells[2:2] = [curve_cell(run.train_points), fmt(dev_perplexity(run), 0)]
        lines.append(_row(cells))
    lines.append("")
    lines.append(
        f"T: TER, M: METEOR, BLEU: {'tokenized BLEU (multi-bleu.perl convention)' if bleu == 'tok_bleu' else 'sacreBLEU'}; "
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
    note = sig.note(rows, model_label(base))
    if note:
        lines += ["", note]
    lines += ["", *_diverged_notes(rows)] if any(r.diverged for r in rows) else []
    lines += ["", "Signatures:", *_signatures(rows, ["tok_bleu", "bleu", "ter", "meteor"]), ""]
    return lines


def render_comparison(comp: dict[str, Any], runs: dict[str, Run], sig: Significance) -> list[str]:
    base_name = comp.get("baseline", comp["rows"][0])
    names = list(dict.fromkeys([base_name, *comp["rows"]]))
    rows = [runs[n] for n in names]
    base = runs[base_name]
    sig = sig.against(base)
    metrics = comp.get("metrics") or [m for m in ("tok_bleu", "bleu", "ter", "meteor", "chrf")]
    metrics = [m for m in metrics if m != "tok_bleu" or any(r.metric("tok_bleu") is not None for r in rows)]
    delta_metric = bleu_metric(rows, comp.get("metric"))
    lines = [f"## {comp.get('title', comp['name'])}", ""]
    header = ["Model", "Enc", "Dec", "Width", "Residual", "Init", "BT", "#param", "Updates"]
    header += [METRIC_HEADERS[m] for m in metrics] + ["Δ"]
    lines += [_row(header), _row([":---"] + ["---:"] * 2 + [":---:"] * 4 + ["---:"] * (len(header) - 7))]
    for run in rows:
        info = run.info
        cells = [
            model_label(run),
            str(info["encoder_layers"]),
            str(info["decoder_layers"]),
            str(info.get("width", "")),
            residual_label(info["residual"]),
            info.get("init", "xavier"),
            "yes" if info.get("backtranslation") else "no",
            fmt_params(run.parameters),
            fmt_updates(run),
        ]
        if run.diverged:
            cells += ["diverged"] * len(metrics) + ["–"]
        else:
            for m in metrics:
                cells.append(fmt(run.metric(m)) + (sig.mark(run.name) if m == sig.metric else ""))
            cells.append(_delta(run, base, delta_metric))
        lines.append(_row(cells))
    lines.append("")
    lines.append(f"Δ: {METRIC_HEADERS[delta_metric]} difference against {model_label(base)}.")
    note = sig.note(rows, model_label(base))
    if note:
        lines += ["", note]
    lines += ["", *_diverged_notes(rows)] if any(r.diverged for r in rows) else []
    lines += ["", "Signatures:", *_signatures(rows, metrics), ""]
    return lines


def render_matrix(title: str, path: str, runs: dict[str, Run]) -> list[str]:
    data = read_json(path)
    lines = [f"## {title}", ""]
    for metric, pw in data.get("pairwise", {}).items():
        names = pw["systems"]
        letters = system_letters(len(names))
        diverged = {i for i, n in enumerate(names) if n in runs and runs[n].diverged}
        header = ["Model", METRIC_HEADERS.get(metric, metric).rstrip("↑↓"), *letters]
        lines += [_row(header), _row([":---", ":---:", *[":---:"] * len(names)])]
        for i, name in enumerate(names):
            label = model_label(runs[name]) if name in runs else name
            if i in diverged:
                cells = ["diverged" if j != i else "" for j in range(len(names))]
                score = "diverged"
            else:
                cells = [
                    "" if j == i else ("·" if j in diverged else pw["matrix"][i][j])
                    for j in range(len(names))
                ]
                score = f"{pw['scores'][i]:.1f}"
            lines.append(_row([f"{letters[i]}:{label}", score, *cells]))
        lines.append("")
        lines.append(
            f"Cell (i, j): row i significantly better (+), worse (-) or not different (=) than column j "
            f"(paired bootstrap, {data.get('n_samples')} resamples, p < {pw['alpha']}); "
            f"· = compared with a diverged run. `{pw['signature']}`"
        )
        lines.append("")
    return lines


def render_data(metas: dict[str, str]) -> list[str]:
    """Per dataset and split: pairs in, kept, removed by filter, and preprocess's cleaning warning."""
    if not metas:
        return []
    lines = ["## Data", "", "| dataset | split | pairs in | kept | removed | by filter |", "| :--- | :--- | ---: | ---: | ---: | :--- |"]  # fmt: skip
    warnings = []
    for ds, path in metas.items():
        splits = read_json(path).get("splits", {})
        for split, st in splits.items():
            removed = st["input"] - st["kept"]
            share = f" ({100 * removed / st['input']:.0f}%)" if st["input"] else ""
            by = ", ".join(f"{k} {v:,}" for k, v in st.get("removed", {}).items()) or "–"
            lines.append(_row([ds, split, f"{st['input']:,}", f"{st['kept']:,}", f"{removed:,}{share}", by]))
            if st.get("warning"):
                warnings.append(f"- **Warning** ({ds}): {st['warning']}.")
    return [*lines, "", *warnings, *([""] if warnings else [])]


def render(spec: dict[str, Any]) -> str:
    runs = {name: load_run(name, info) for name, info in spec["experiments"].items()}
    tables = spec["tables"]
    sig_paths = spec.get("significance", {})
    lines = [
        "# Results",
        "",
        f"Generated by `python -m pipeline_lib report` from the score files of the workflow "
        f"(split: {spec['split']}). Do not edit: rerun `snakemake {spec.get('tables_path', 'results/tables.md')}`.",
        "",
    ]
    if "table1" in tables:
        t1_metric = tables["table1"].get("metric", "bleu")
        lines += render_table1(spec, runs, Significance(sig_paths.get("table1"), t1_metric))
    for comp in tables.get("comparisons", []):
        comp_sig = Significance(sig_paths.get(comp["name"]), comp.get("metric", "bleu"))
        lines += render_comparison(comp, runs, comp_sig)
    if "significance" in tables and "table3" in sig_paths:
        lines += render_matrix(tables["significance"].get("title", "Table 3"), sig_paths["table3"], runs)
    lines += render_data(spec.get("data", {}))
    lines += ["## Sources", ""]
    for name, info in spec["experiments"].items():
        lines.append(f"- `{name}`: {model_label(runs[name])}: `{info['score']}`, `{info['status']}`")
    return "\n".join(lines).rstrip() + "\n"
