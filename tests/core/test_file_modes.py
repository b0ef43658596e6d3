"""Outputs respect the umask: results on a shared filesystem are readable by colleagues (no 0600).

Each writer runs in a child process whose umask is set first (the test process' umask is left alone):
the atomic writers, the translate outputs, checkpoints, Admin profiles, and a real `score` and `report`
through the CLI."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

WRITERS = """
import sys, torch
from pathlib import Path
from pipeline_lib.atomic import AtomicGroup, write_bytes, write_json, write_text
from pipeline_lib.checkpoint import save_checkpoint
from pipeline_lib.decode.outputs import OutputWriter, Rendered
from pipeline_lib.model import ModelConfig
from pipeline_lib.model.admin import closed_form_profile
out = Path(sys.argv[1])
write_text(out / "a.txt", "x")
write_bytes(out / "b.png", b"x")
write_json(out / "c.json", {})
with AtomicGroup() as group:
    group.tmp_for(out / "d.txt").write_text("x")
with OutputWriter(output=str(out / "e.hyp"), output_subword=str(out / "e.bpe")) as writer:
    writer.write([], Rendered([], []), [], None)
save_checkpoint({"model": {}}, out / "f.pt")
closed_form_profile(ModelConfig(src_vocab_size=8, tgt_vocab_size=8, residual="admin")).save(out / "g.json")
"""


def _modes(root: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664)])
def test_every_writer_follows_the_umask(tmp_path: Path, umask: int, mode: int):
    proc = subprocess.run([sys.executable, "-c", WRITERS, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: os.umask(umask))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    modes = _modes(tmp_path)
    assert set(modes) == {"a.txt", "b.png", "c.json", "d.txt", "e.hyp", "e.bpe", "f.pt", "g.json"}
    assert modes == dict.fromkeys(modes, mode)


def test_score_and_report_results_are_group_readable(tmp_path: Path):
    (tmp_path / "hyp.fr").write_text("le chat\n")
    (tmp_path / "ref.fr").write_text("le chat\n")
    (tmp_path / "status.json").write_text(json.dumps({"status": "completed", "update": 1, "epoch": 1}))
    run = {"preexec_fn": lambda: os.umask(0o022), "capture_output": True, "text": True, "timeout": 120}
    score = tmp_path / "res" / "test.score.json"
    proc = subprocess.run([sys.executable, "-m", "pipeline_lib", "score", "--hyp", str(tmp_path / "hyp.fr"),
                           "--ref", str(tmp_path / "ref.fr"), "--output", str(score)], **run)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    info = {"score": str(score), "status": str(tmp_path / "status.json"), "train_log": str(tmp_path / "none"),
            "encoder_layers": 1, "decoder_layers": 1, "residual": "post_ln", "width": "base", "d_model": 8}  # fmt: skip
    spec = {"split": "test", "experiments": {"m": info}, "tables": {"table1": {"baseline": "m", "rows": []}}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    tables = tmp_path / "res" / "tables.md"
    proc = subprocess.run([sys.executable, "-m", "pipeline_lib", "report", "--spec", str(tmp_path / "spec.json"),
                           "--tables", str(tables)], **run)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _modes(tmp_path / "res") == {"test.score.json": 0o644, "tables.md": 0o644}
