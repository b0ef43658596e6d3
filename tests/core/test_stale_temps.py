"""A stage removes the temporary files its own killed runs left, on its next run, and nothing else:
not another output's, not one a live writer touched after the stage started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline_lib.atomic import PROCESS_START, write_text
from pipeline_lib.data.vocab import Vocabulary
from tests.decode.test_cli_target_lang import TOKENS, write_checkpoint


def test_only_the_outputs_own_temps_from_before_the_start_are_removed(tmp_path: Path):
    killed = tmp_path / ".a.txt.tmp4242"  # a killed earlier writer of a.txt
    live = tmp_path / ".a.txt.tmp4343"  # written after this process started: someone is writing
    other = tmp_path / ".b.txt.tmp4242"  # another output's: its own stage cleans it
    for path in (killed, live, other):
        path.write_text("partial", encoding="utf-8")
    os.utime(killed, (PROCESS_START - 60, PROCESS_START - 60))
    os.utime(other, (PROCESS_START - 60, PROCESS_START - 60))
    write_text(tmp_path / "a.txt", "done\n")
    assert (tmp_path / "a.txt").read_text() == "done\n"
    assert not killed.exists()
    assert live.exists() and other.exists()


def test_a_killed_translate_leaves_temps_that_the_next_translate_removes(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    Vocabulary(TOKENS).save(bin_dir / "vocab.txt")
    (bin_dir / "meta.json").write_text('{"src_lang": "en", "tgt_lang": "fr"}', encoding="utf-8")
    ckpt = write_checkpoint(tmp_path / "ckpt.pt", bin_dir, "en", "fr")
    inp = tmp_path / "in.txt"
    inp.write_text("homme il ? l' homme :\n" * 3000, encoding="utf-8")
    out = tmp_path / "test.hyp"
    cmd = [sys.executable, "-m", "pipeline_lib", "translate", "--checkpoint", str(ckpt), "--input", str(inp),
           "--output", str(out), "--beam", "4", "--device", "cpu", "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".test.hyp.tmp*")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = list(tmp_path.glob(".test.hyp.tmp*"))
    assert left and not out.exists()
    inp.write_text("homme il\n", encoding="utf-8")
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert out.read_text(encoding="utf-8").count("\n") == 1
    assert not list(tmp_path.glob(".test.hyp.tmp*")), "the killed run's temporary file is still there"
    assert "removed 1 stale temporary file(s)" in rerun.stderr
