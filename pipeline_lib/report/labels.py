"""How a table names a system: its label, or depth, width, residual variant, init and BT."""

from __future__ import annotations

from pipeline_lib.model.registry import residual_label
from pipeline_lib.report.inputs import Run


def layout_label(info: dict) -> str:
    """The residual variant; a hybrid names both sides ("Post-LN enc., Pre-LN dec.")."""
    encoder = residual_label(info["residual"])
    decoder = info.get("decoder_residual")
    return f"{encoder} enc., {residual_label(decoder)} dec." if decoder else encoder


def model_label(run: Run) -> str:
    info = run.info
    if info.get("label") and info["label"] != run.name:
        return info["label"]
    depth = f"{info['encoder_layers']}L-{info['decoder_layers']}L"
    width = f"-{info['width']}" if info.get("width") and info["width"][0].isdigit() else ""
    init = " Lipschitz" if info.get("init") == "lipschitz" else ""
    bt = " + BT" if info.get("backtranslation") else ""
    return f"{depth}{width} {layout_label(info)}{init}{bt}"
