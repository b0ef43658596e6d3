"""pipeline_lib/atomic.py: the one way to write a file.

- no module but atomic.py renames files or names its own temporary files (parsed, like test_layering);
- a write that fails for lack of room leaves the previous file and no temporary file, and says so in
  one line (a child process under RLIMIT_FSIZE: the kernel's EFBIG, no root needed);
- a profile save SIGKILLed mid-write leaves its temporary file, and the rerun removes it.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

from train_fixtures import TINY_MODEL, make_bin_dir

from pipeline_lib.atomic import is_temp_file, remove_stale_temp_files
from pipeline_lib.model.admin import AdminProfile

PACKAGE = Path(__file__).resolve().parents[2] / "pipeline_lib"


def _group_temp(node: ast.expr) -> bool:
    """``group.tmp_for(...)``, or a variable named for one (``meta_tmp``): a group's temporary file."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "tmp_for"
    return isinstance(node, ast.Name) and "tmp" in node.id


def _path_rename(call: ast.Call) -> bool:
    """``Path.replace``/``Path.rename`` take one argument (``str.replace`` takes two)."""
    return call.func.attr in ("replace", "rename") and len(call.args) == 1 and not call.keywords


def _final_write(call: ast.Call) -> bool:
    return call.func.attr in ("write_text", "write_bytes") and not _group_temp(call.func.value)


def _bypasses(path: Path) -> list[str]:
    """Renames (``os.replace``/``os.rename``/``shutil.move``, ``Path.replace``/``Path.rename``: one
    argument, unlike ``str.replace``), direct ``Path.write_text``/``write_bytes`` of a final file and
    ``.tmp`` names in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
            name = node.func.attr
            if (owner, name) in {("os", "replace"), ("os", "rename"), ("shutil", "move")}:
                found.append(f"{owner}.{name} line {node.lineno}")
            elif _path_rename(node) or _final_write(node):
                found.append(f".{name}() line {node.lineno}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ".tmp" in node.value:
            found.append(f"{node.value!r} line {node.lineno}")
    return found


def test_only_atomic_renames_or_names_temporary_files() -> None:
    offenders = {
        str(p.relative_to(PACKAGE)): hits
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name != "atomic.py" and (hits := _bypasses(p))
    }
    assert not offenders, offenders


FULL_DISK = """
import resource, sys
from pathlib import Path
import os
from pipeline_lib.atomic import AtomicGroup, WriteError, atomic_open, write_bytes
out = Path(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))  # writes past 1000 bytes fail with EFBIG
try:
    write_bytes(out / "kept.bin", b"x" * 5000)
except WriteError as exc:
    print(exc)
try:
    with AtomicGroup() as group:
        group.tmp_for(out / "a.txt").write_text("small")
        with group.tmp_for(out / "b.txt").open("w") as handle:
            handle.write("y" * 5000)
except WriteError as exc:
    print(exc)
try:  # a library that wraps the failure in its own error, as torch.save does
    with atomic_open(out / "wrapped.bin", "wb") as handle:
        try:
            while True:  # unbuffered: the first write stops at the limit, the next one fails
                os.write(handle.fileno(), b"z" * 5000)
        except OSError as exc:
            raise RuntimeError("unexpected pos") from exc
except WriteError as exc:
    print(exc)
"""


def test_a_failed_write_keeps_the_previous_file_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "kept.bin").write_bytes(b"old")
    (tmp_path / "a.txt").write_text("old a")
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    single, group, wrapped = proc.stdout.splitlines()
    assert single == (
        f"cannot write {tmp_path / 'kept.bin'}: File too large (EFBIG); kept: the previous kept.bin, unchanged"
    )
    # the failing write was on an open handle (no file name): the group names its outputs' folder
    assert group == f"cannot write {tmp_path}: File too large (EFBIG); kept: the previous outputs, unchanged"
    assert (
        wrapped
        == f"cannot write {tmp_path / 'wrapped.bin'}: File too large (EFBIG); kept: nothing (no wrapped.bin yet)"
    )
    assert (tmp_path / "kept.bin").read_bytes() == b"old"
    assert (tmp_path / "a.txt").read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "kept.bin"]


def test_the_cleaner_removes_only_the_schemes_temporary_files(tmp_path: Path) -> None:
    names = [".a.json.tmp123", ".b.txt.tmp9", "a.json.tmp", ".a.json.tmp", "a.json", ".hidden"]
    for name in names:
        (tmp_path / name).write_text("x")
    assert [p.name for p in remove_stale_temp_files(tmp_path, target="a.json")] == [".a.json.tmp123"]
    assert [p.name for p in remove_stale_temp_files(tmp_path)] == [".b.txt.tmp9"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])


# The profile stage with its save stalled after the data is written (the fsync before the rename).
STALLED_SAVE = """
import os, sys, time
from pipeline_lib.cli import main
def stalled(fd):
    print("writing", flush=True)
    time.sleep(600)
os.fsync = stalled
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_profile_save_leaves_nothing_after_the_rerun(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path)
    exp = tmp_path / "experiments" / "6L-admin"
    output = exp / "admin_profile.json"
    args = ["profile", "--data", str(bin_dir), "-s", "xx", "-t", "yy", "--output", str(output), "--closed-form",
            "--device", "cpu", *TINY_MODEL, "--residual", "admin"]  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", STALLED_SAVE, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout.readline() == "writing\n", child.communicate(timeout=60)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=60)
    left = [p.name for p in exp.iterdir()]
    assert left == [f".admin_profile.json.tmp{child.pid}"]  # killed mid-write, under the one scheme
    (exp / ".other.json.tmp1").write_text("another file's: not the profile stage's to remove")

    rerun = subprocess.run([sys.executable, "-m", "pipeline_lib", *args], capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert sorted(p.name for p in exp.iterdir()) == [".other.json.tmp1", "admin_profile.json"]
    assert not is_temp_file(output)
    assert AdminProfile.load(output).method == "closed_form"
