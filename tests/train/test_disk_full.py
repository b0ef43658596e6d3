"""A full disk during a checkpoint save: one line naming the file, the cause and the checkpoint a rerun
resumes from (exit 74, no traceback); that checkpoint intact; the rerun, with room again, resumes
from it and trains exactly as a run that never stopped.

The small filesystem is a tmpfs mounted for the test (ENOSPC), unmounted after it. Where mounting is
not allowed (not root), the run gets an RLIMIT_FSIZE smaller than a checkpoint instead (EFBIG).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.atomic import is_temp_file
from pipeline_lib.checkpoint import LAST, load_checkpoint
from pipeline_lib.cli import EXIT_WRITE_FAILED


class SmallDisk:
    """A folder whose writes can be made to fail for lack of room."""

    def __init__(self, root: Path, mounted: bool) -> None:
        self.root, self.mounted = root, mounted
        self._filler = root / "filler"
        self.limit: int | None = None

    def fill(self, leave: int) -> None:
        """Leave ``leave`` bytes: of the filesystem (tmpfs) or of any one file (RLIMIT_FSIZE)."""
        if self.mounted:
            st = os.statvfs(self.root)
            with open(self._filler, "wb") as f:
                f.write(b"\0" * (st.f_bavail * st.f_frsize - leave))
        else:
            self.limit = leave

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)
        self.limit = None

    def preexec(self) -> Callable[[], None] | None:
        limit = self.limit
        if limit is None:
            return None
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    root = tmp_path / "fs"
    root.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(root)], capture_output=True)
    try:
        yield SmallDisk(root, mount.returncode == 0)
    finally:
        if mount.returncode == 0:
            subprocess.run(["umount", "--lazy", str(root)], check=True)


def _train(bin_dir: Path, save: Path, max_update: int, disk: SmallDisk) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pipeline_lib", *train_args(bin_dir, save, "--max-update", str(max_update))]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=disk.preexec())


def test_disk_full_during_a_checkpoint_save(tmp_path: Path, small_disk: SmallDisk) -> None:
    bin_dir = make_bin_dir(tmp_path)
    save = small_disk.root / "run"
    first = _train(bin_dir, save, 4, small_disk)
    assert first.returncode == 0, first.stderr
    checkpoint_size = (save / LAST).stat().st_size

    small_disk.fill(leave=checkpoint_size // 2)  # room for the logs, not for a checkpoint
    full = _train(bin_dir, save, 8, small_disk)
    assert full.returncode == EXIT_WRITE_FAILED, full.stderr
    assert "Traceback" not in full.stderr
    errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, full.stderr
    cause = "No space left on device (ENOSPC)" if small_disk.mounted else "File too large (EFBIG)"
    assert errors[0].startswith(f"error: cannot write {save}/checkpoint"), errors[0]
    # the write that hits the full disk is the run's checkpoint or, at a validation, checkpoint_best.pt
    assert errors[0].endswith(
        f".pt: {cause}; kept: the last good checkpoint, {save / LAST} (update 4); a rerun resumes from it"
    ) or errors[0].endswith(
        f"checkpoint_best.pt: {cause}; kept: the previous checkpoint_best.pt, unchanged"
    ), errors[0]
    assert load_checkpoint(save / LAST)["num_updates"] == 4  # intact: loads and its checksum holds
    assert not [p for p in save.iterdir() if is_temp_file(p)]

    small_disk.free()
    rerun = _train(bin_dir, save, 8, small_disk)
    assert rerun.returncode == 0, rerun.stderr
    assert [r["update"] for r in read_log(save, "resume")] == [4, 4]  # the extended budget, then the rerun
    reference = tmp_path / "reference"
    assert _train(bin_dir, reference, 8, small_disk).returncode == 0
    loss = {r["update"]: r["loss"] for r in read_log(save)}
    assert loss == {r["update"]: r["loss"] for r in read_log(reference)}
    assert load_checkpoint(save / LAST)["num_updates"] == 8
