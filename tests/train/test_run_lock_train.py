"""Two trainers on one save dir: the second is refused in one line while the first runs, and the
first finishes undisturbed (issue 54: the second used to resume from the first's checkpoint_last.pt)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch
from train_fixtures import make_bin_dir, read_log, train_args


def test_a_second_trainer_on_a_busy_save_dir_is_refused(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    bin_dir, save = make_bin_dir(tmp_path), tmp_path / "run"
    cmd = [sys.executable, "-m", "pipeline_lib", *train_args(bin_dir, save, "--max-update", "400")]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ((save / "train_log.jsonl").exists() and read_log(save)):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first trainer did not start"
            time.sleep(0.05)
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert second.returncode != 0, second.stderr[-2000:]
        assert first.poll() is None, "the first trainer ended before the second was refused"
        errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, second.stderr[-2000:]
        assert f"{save}: training directory in use by pid {first.pid} on " in errors[0]
        assert "Traceback" not in second.stderr and "resuming from" not in second.stderr
    finally:
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    assert [r["update"] for r in read_log(save)][-1] == 400
    assert not read_log(save, "resume")
