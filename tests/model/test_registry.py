"""The residual registry is the one place a variant is named: a new variant registered there alone
builds, trains and appears in the tables; the config schema offers exactly the registered names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_model
from pipeline_lib.cli import main
from pipeline_lib.model.config import HYBRID_RESIDUALS
from pipeline_lib.model.registry import ResidualSpec, register, residual_names, unregister
from pipeline_lib.model.residual import PostLNConnection, ResidualVariant
from pipeline_lib.report.inputs import Run
from pipeline_lib.report.tables import Significance, render_comparison
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema

REPO = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


class HalfShortcut(PostLNConnection):
    """x = LN(x / 2 + f(x)): a variant no module of the package knows."""

    def forward(self, x, f):
        return self.norm(0.5 * x + self.branch(f, x))


@pytest.fixture
def half_shortcut():
    spec = register(
        ResidualSpec("half_shortcut", "Half-shortcut", lambda config: ResidualVariant(HalfShortcut, False))
    )
    yield spec
    unregister(spec.name)


def test_a_variant_registered_alone_trains_and_reaches_the_tables(tmp_path: Path, half_shortcut):
    bin_dir = make_bin_dir(tmp_path)
    save = tmp_path / "run"
    argv = train_args(bin_dir, save, "--residual", "half_shortcut", "--max-update", "3", "--dropout", "0")
    assert main(argv) == 0
    assert json.loads((save / "status.json").read_text())["status"] == "completed"
    losses = [r["loss"] for r in read_log(save)]
    assert len(losses) == 3 and all(loss == loss for loss in losses)  # three finite updates
    model, _ = load_model(save / "checkpoint_last.pt")
    kinds = {type(m) for m in model.modules() if isinstance(m, PostLNConnection)}
    assert kinds == {HalfShortcut}, kinds

    info = {"encoder_layers": 2, "decoder_layers": 2, "residual": "half_shortcut"}
    score = {"scores": {"bleu": {"score": 1.0, "signature": "s"}}}
    runs = {n: Run(n, info, {"status": "completed"}, score) for n in ("a", "b")}
    comp = {"name": "c", "title": "T", "baseline": "a", "rows": ["a", "b"], "metrics": ["bleu"]}
    sig = tmp_path / "sig.json"
    sig.write_text(json.dumps({"alpha": 0.05, "vs_baseline": {"bleu": {"systems": []}}}))
    table = "\n".join(render_comparison(comp, runs, Significance(str(sig))))
    assert "Half-shortcut" in table, table


def test_schema_offers_exactly_the_registered_variants(half_shortcut):
    # the YAML names the registry, never a copy of its names; the loaded schema lists them, and a
    # variant registered before the schema loads (a user's plugin) among them
    assert SCHEMA["definitions"]["residual"] == {
        "description": "residual variant (pipeline_lib/model/registry.py)",
        "x-enum": "residual",
    }
    loaded = load_schema(REPO / SCHEMA_FILE)
    assert tuple(loaded["definitions"]["residual"]["enum"]) == residual_names()
    assert half_shortcut.name in loaded["definitions"]["residual"]["enum"]
    experiments = loaded["properties"]["experiments"]["additionalProperties"]["properties"]
    assert experiments["residual"] == {"$ref": "#/definitions/residual"}
    assert tuple(experiments["decoder_residual"]["enum"]) == HYBRID_RESIDUALS  # the layouts that mix
    methods = SCHEMA["properties"]["stability_map"]["properties"]["methods"]["items"]
    assert methods == {"$ref": "#/definitions/residual"}  # the map accepts every method


def test_registering_a_name_twice_is_refused(half_shortcut):
    with pytest.raises(ValueError, match="registered already"):
        register(half_shortcut)
