"""A checkpoint that would run code is refused in words that say so, never advising the unsafe load;
a truncated one is still called truncated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pipeline_lib.checkpoint import load_checkpoint, load_model
from pipeline_lib.errors import CheckpointError


class RunsCode:
    """Unpickling this calls os.system: what a hostile "checkpoint" carries."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def hostile_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    marker, path = tmp_path / "RAN", tmp_path / "checkpoint_best.pt"
    torch.save(
        {"format": "deepnmt-checkpoint/1", "model": {"w": torch.zeros(2)}, "x": RunsCode(marker)}, path
    )
    return path, marker


@pytest.mark.parametrize("loader", [load_checkpoint, load_model])
def test_a_checkpoint_carrying_code_is_refused_as_unsafe(tmp_path: Path, loader):
    path, marker = hostile_checkpoint(tmp_path)
    with pytest.raises(CheckpointError) as info:
        loader(path)
    message = str(info.value)
    assert message.startswith(f"checkpoint {path} refused as unsafe, not loaded: it would import ")
    assert "system" in message  # posix.system on Linux: the call the file carries
    assert "weights_only" not in message and "truncated" not in message and "corrupt" not in message
    assert not marker.exists()


def test_the_cli_refusal_is_one_line_without_torchs_advice(tmp_path: Path):
    path, marker = hostile_checkpoint(tmp_path)
    out = tmp_path / "avg.pt"
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "average", "--inputs", str(path), str(path), "--output", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "refused as unsafe" in proc.stderr, proc.stderr[-2000:]
    assert "weights_only" not in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists() and not out.exists()


def test_a_truncated_checkpoint_is_still_called_truncated(tmp_path: Path):
    path = tmp_path / "checkpoint_last.pt"
    torch.save({"format": "deepnmt-checkpoint/1", "model": {"w": torch.zeros(1000)}}, path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(CheckpointError, match=r"is truncated or corrupt: "):
        load_checkpoint(path)


def test_a_pickle_with_opcodes_outside_the_safe_set_is_refused_without_the_advice(tmp_path: Path):
    path = tmp_path / "odd.pt"
    path.write_bytes(b"\x80\x02garbage" * 10)  # a legacy (non-zip) pickle stream with a stray opcode
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert "refused as unsafe" in str(info.value) and "weights_only" not in str(info.value)
