"""A save dir holds one run: the same settings resume it, other settings or data set it aside."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_lib.train.run_identity import (
    IDENTITY_FILE,
    SUPERSEDED_DIR,
    prepare_save_dir,
    run_identity,
)


def _bin_dir(root: Path, train_digest: str = "aa") -> Path:
    d = root / "bin"
    d.mkdir(exist_ok=True)
    meta = {
        "vocab_sha256": "v",
        "splits": {
            "train": {"pairs": 3, "en_sha256": train_digest},
            "valid": {"pairs": 1, "en_sha256": "bb"},
        },
    }
    (d / "meta.json").write_text(json.dumps(meta))
    return d


def _train(root: Path, digest: str = "aa", **kw) -> dict:
    return {"data": str(_bin_dir(root, digest)), "save_dir": str(root / "exp"), "lr": 0.002, "num_threads": 1,
            "max_update": 100, "max_epoch": 0, "lr_scheduler": "inverse_sqrt", "admin_profile": None, **kw}  # fmt: skip


def _leave_a_run(save: Path, update: int = 50) -> None:
    (save / "checkpoint_last.pt").write_bytes(b"x")
    (save / "status.json").write_text('{"status": "preempted"}')
    (save / "train_log.jsonl").write_text(json.dumps({"kind": "train", "update": update, "epoch": 1}) + "\n")


def test_same_settings_resume_and_runtime_settings_do_not_count(tmp_path: Path):
    save = tmp_path / "exp"
    assert prepare_save_dir(save, run_identity(_train(tmp_path), {"d": 32})) == "new"
    _leave_a_run(save)
    again = run_identity(_train(tmp_path, num_threads=8, device="cuda", progress="lines"), {"d": 32})
    assert prepare_save_dir(save, again) == "resume"
    assert (save / "checkpoint_last.pt").is_file() and not (save / SUPERSEDED_DIR).exists()


def test_a_changed_setting_sets_the_run_aside_with_its_files(tmp_path: Path, capsys):
    save = tmp_path / "exp"
    old = run_identity(_train(tmp_path), {"d": 32})
    prepare_save_dir(save, old)
    _leave_a_run(save)
    (save / "admin_profile.json").write_text("{}")  # an input of the run, written by another stage
    assert prepare_save_dir(save, run_identity(_train(tmp_path, lr=0.003), {"d": 32})) == "superseded"
    [archive] = list((save / SUPERSEDED_DIR).iterdir())
    assert archive.name.endswith(old["id"])
    assert {p.name for p in archive.iterdir()} == {
        "checkpoint_last.pt",
        "status.json",
        "train_log.jsonl",
        IDENTITY_FILE,
    }
    assert sorted(p.name for p in save.iterdir()) == ["admin_profile.json", IDENTITY_FILE, SUPERSEDED_DIR]
    assert "train.lr" in capsys.readouterr().out


def test_changed_data_content_or_model_sets_the_run_aside(tmp_path: Path):
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path), {"d": 32}))
    _leave_a_run(save)
    changed = run_identity(_train(tmp_path, digest="cc"), {"d": 32})  # same path, other content
    assert prepare_save_dir(save, changed) == "superseded"
    _leave_a_run(save)
    assert prepare_save_dir(save, run_identity(_train(tmp_path, digest="cc"), {"d": 64})) == "superseded"
    assert len(list((save / SUPERSEDED_DIR).iterdir())) == 2


def test_a_raised_budget_continues_a_smaller_one_restarts(tmp_path: Path):
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path), {}))
    _leave_a_run(save, update=100)
    assert prepare_save_dir(save, run_identity(_train(tmp_path, max_update=200), {})) == "resume"
    assert json.loads((save / IDENTITY_FILE).read_text())["budget"]["max_update"] == 200
    assert prepare_save_dir(save, run_identity(_train(tmp_path, max_update=60), {})) == "superseded"


def test_a_schedule_that_decays_to_the_budget_makes_it_part_of_the_identity(tmp_path: Path):
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path, lr_scheduler="linear"), {}))
    _leave_a_run(save, update=10)
    raised = run_identity(_train(tmp_path, lr_scheduler="linear", max_update=200), {})
    assert prepare_save_dir(save, raised) == "superseded"


def test_a_run_without_recorded_settings_is_set_aside(tmp_path: Path):
    save = tmp_path / "exp"
    save.mkdir()
    _leave_a_run(save)
    assert prepare_save_dir(save, run_identity(_train(tmp_path), {})) == "superseded"
    assert next((save / SUPERSEDED_DIR).iterdir()).name.endswith("unrecorded")


def test_the_batch_counts_as_tokens_per_update_not_its_split(tmp_path: Path):
    save = tmp_path / "exp"
    v100 = run_identity(_train(tmp_path, max_tokens=3584, update_freq=8), {"d": 32}, world_size=16)
    h200 = run_identity(_train(tmp_path, max_tokens=28672, update_freq=1), {"d": 32}, world_size=16)
    one_node = run_identity(_train(tmp_path, max_tokens=28672, update_freq=2), {"d": 32}, world_size=8)
    assert v100["id"] == h200["id"] == one_node["id"]
    assert v100["train"]["tokens_per_update"] == 458_752 and "max_tokens" not in v100["train"]
    half = run_identity(_train(tmp_path, max_tokens=3584, update_freq=4), {"d": 32}, world_size=16)
    assert half["id"] != v100["id"]
    prepare_save_dir(save, v100)
    _leave_a_run(save)
    assert prepare_save_dir(save, h200) == "resume"


def test_a_run_recorded_under_the_older_identity_resumes(tmp_path: Path):
    """Before the tokens-per-update rule the id digested max_tokens and update_freq themselves."""
    import hashlib

    train = _train(tmp_path, max_tokens=3584, update_freq=8)
    new = run_identity(train, {"d": 32}, world_size=16)
    settings = {
        k: v for k, v in train.items() if k not in ("data", "save_dir", "admin_profile", "num_threads")
    }
    settings = {k: v for k, v in settings.items() if k not in ("max_update", "max_epoch")}
    older = {"train": settings, "model": {"d": 32}, "data": new["data"], "admin_profile_sha256": None}
    old_id = hashlib.sha256(json.dumps(older, sort_keys=True, default=str).encode()).hexdigest()[:16]
    save = tmp_path / "exp"
    save.mkdir()
    (save / IDENTITY_FILE).write_text(json.dumps({**older, "id": old_id, "budget": new["budget"]}))
    _leave_a_run(save)
    assert prepare_save_dir(save, new) == "resume"
    assert json.loads((save / IDENTITY_FILE).read_text())["id"] == new["id"]
