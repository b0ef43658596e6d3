"""Mutation gaps of run_identity (docs/mutation.md): one fast test per surviving mutant, each with an
oracle independent of the code under test: hashlib over the file's bytes, messages and file sets
written out by hand."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from pipeline_lib.train.run_identity import (
    IDENTITY_FILE,
    SUPERSEDED_DIR,
    data_identity,
    prepare_save_dir,
    run_identity,
)
from tests.train.test_run_identity import _bin_dir, _leave_a_run, _train


def _log(save: Path, *records: str) -> None:
    (save / "checkpoint_last.pt").write_bytes(b"x")
    (save / "train_log.jsonl").write_text("".join(r + "\n" for r in records))


# -- where the previous run stopped --------------------------------------------------------------------


def test_a_torn_last_log_line_is_skipped_for_the_record_before_it(tmp_path: Path) -> None:
    """A run killed mid-write leaves half a line: the position is the last whole record's (update 80,
    past a budget of 60), not 'no position' (which would resume a run already past its budget)."""
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path), {}))
    _log(save, json.dumps({"update": 80, "epoch": 1}), '{"update": 9')
    assert prepare_save_dir(save, run_identity(_train(tmp_path, max_update=60), {})) == "superseded"


@pytest.mark.parametrize("max_epoch, outcome", [(2, "superseded"), (3, "resume"), (4, "resume")])
def test_an_epoch_budget_below_the_runs_epoch_restarts_it(
    tmp_path: Path, max_epoch: int, outcome: str
) -> None:
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path, max_update=0, max_epoch=5), {}))
    _log(save, json.dumps({"update": 30, "epoch": 3}))
    assert (
        prepare_save_dir(save, run_identity(_train(tmp_path, max_update=0, max_epoch=max_epoch), {}))
        == outcome
    )


def test_a_run_preempted_before_its_first_log_line_resumes(tmp_path: Path) -> None:
    save = tmp_path / "exp"
    identity = run_identity(_train(tmp_path), {})
    prepare_save_dir(save, identity)
    (save / "checkpoint_last.pt").write_bytes(b"x")  # no train_log.jsonl yet
    assert prepare_save_dir(save, identity) == "resume"


# -- what the log line says changed --------------------------------------------------------------------


def test_the_message_names_every_changed_setting_in_order(tmp_path: Path, capsys) -> None:
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path), {"d": 32, "heads": 4}))
    _leave_a_run(save)
    profile = tmp_path / "admin_profile.json"
    profile.write_text("{}")
    new = run_identity(
        _train(tmp_path, digest="cc", lr=0.003, warmup=10, admin_profile=str(profile)), {"d": 64, "heads": 4}
    )
    assert prepare_save_dir(save, new) == "superseded"
    out = capsys.readouterr().out
    assert "(train.lr, train.warmup, model.d, data, admin_profile_sha256)" in out


def test_a_setting_that_only_the_old_run_had_is_named(tmp_path: Path, capsys) -> None:
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path, dropout=0.3), {"d": 32, "tied": True}))
    _leave_a_run(save)
    prepare_save_dir(save, run_identity(_train(tmp_path), {"d": 32}))
    assert "(train.dropout, model.tied);" in capsys.readouterr().out


# -- the data and the profile --------------------------------------------------------------------------


def test_data_without_split_digests_is_identified_by_its_meta_files_bytes(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text('{"splits": {"train": {"pairs": 3}, "valid": {"pairs": 1}}}')
    expected = hashlib.sha256((tmp_path / "meta.json").read_bytes()).hexdigest()
    assert data_identity(tmp_path) == {"meta_sha256": expected}
    assert data_identity(tmp_path / "nowhere") == {"meta": None}


def test_only_the_train_and_valid_digests_and_the_vocabulary_count(tmp_path: Path) -> None:
    bin_dir = _bin_dir(tmp_path)
    meta = json.loads((bin_dir / "meta.json").read_text())
    assert data_identity(bin_dir) == {"vocab_sha256": "v", "splits": meta["splits"]}
    meta["splits"]["test"] = {"pairs": 9, "en_sha256": "dd"}  # a test split is not trained on
    (bin_dir / "meta.json").write_text(json.dumps(meta))
    assert data_identity(bin_dir) == {
        "vocab_sha256": "v",
        "splits": {s: meta["splits"][s] for s in ("train", "valid")},
    }


def test_the_profiles_content_counts_not_its_path(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text('{"omega": [1.0]}')
    b.write_text('{"omega": [1.0]}')
    c.write_text('{"omega": [2.0]}')
    ids = {p.name: run_identity(_train(tmp_path, admin_profile=str(p)), {}) for p in (a, b, c)}
    assert ids["a.json"]["id"] == ids["b.json"]["id"] != ids["c.json"]["id"]
    assert ids["a.json"]["admin_profile_sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()
    missing = run_identity(_train(tmp_path, admin_profile=str(tmp_path / "absent.json")), {})
    assert missing["admin_profile_sha256"] is None


def test_the_id_is_16_hex_digits_independent_of_key_order(tmp_path: Path) -> None:
    one = run_identity(_train(tmp_path, lr=0.002, dropout=0.1), {"d": 32, "heads": 4})
    other = run_identity(
        dict(reversed(_train(tmp_path, lr=0.002, dropout=0.1).items())), {"heads": 4, "d": 32}
    )
    assert re.fullmatch(r"[0-9a-f]{16}", one["id"]) and one["id"] == other["id"]
    assert one["budget"] == {"max_update": 100, "max_epoch": 0}


@pytest.mark.parametrize("value, same", [("", True), ("dlcl", False)])
def test_a_later_model_field_at_its_default_keeps_the_old_id(tmp_path: Path, value: str, same: bool) -> None:
    before = run_identity(_train(tmp_path), {"d": 32})
    after = run_identity(_train(tmp_path), {"d": 32, "decoder_residual": value})
    assert (before["id"] == after["id"]) == same


@pytest.mark.parametrize("schedule", ["linear", "cosine", "polynomial_decay", "tri_stage"])
def test_every_schedule_that_decays_to_the_budget_digests_it(tmp_path: Path, schedule: str) -> None:
    a = run_identity(_train(tmp_path, lr_scheduler=schedule, max_update=100), {})
    b = run_identity(_train(tmp_path, lr_scheduler=schedule, max_update=200), {})
    assert a["id"] != b["id"]
    c = run_identity(_train(tmp_path, lr_scheduler="inverse_sqrt", max_update=100, max_epoch=3), {})
    d = run_identity(_train(tmp_path, lr_scheduler="inverse_sqrt", max_update=200, max_epoch=9), {})
    assert c["id"] == d["id"]


# -- the save dir --------------------------------------------------------------------------------------


def test_a_fresh_save_dir_is_new_and_records_the_identity(tmp_path: Path) -> None:
    save = tmp_path / "deep" / "exp"  # parents made too
    identity = run_identity(_train(tmp_path), {"d": 32})
    assert prepare_save_dir(save, identity) == "new"
    assert json.loads((save / IDENTITY_FILE).read_text()) == json.loads(json.dumps(identity))


def test_another_runs_identity_file_alone_is_replaced_without_an_archive(tmp_path: Path) -> None:
    save = tmp_path / "exp"
    prepare_save_dir(save, run_identity(_train(tmp_path, lr=0.1), {}))
    (save / "admin_profile.json").write_text("{}")  # not the run's: no reason to archive
    identity = run_identity(_train(tmp_path), {})
    assert prepare_save_dir(save, identity) == "new"
    assert not (save / SUPERSEDED_DIR).exists()
    assert json.loads((save / IDENTITY_FILE).read_text())["id"] == identity["id"]


def test_a_superseded_run_is_archived_under_its_time_and_id(tmp_path: Path, capsys) -> None:
    save = tmp_path / "exp"
    old = run_identity(_train(tmp_path), {})
    prepare_save_dir(save, old)
    _leave_a_run(save, update=100)
    smaller = run_identity(_train(tmp_path, max_update=60), {})
    assert prepare_save_dir(save, smaller) == "superseded"
    [archive] = (save / SUPERSEDED_DIR).iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-" + old["id"], archive.name)
    assert (
        f"{save}: settings or data changed (a smaller budget); the previous run moved to {archive}; starting afresh"
        in capsys.readouterr().out
    )
    assert json.loads((save / IDENTITY_FILE).read_text())["budget"]["max_update"] == 60


def test_an_unrecorded_run_says_so(tmp_path: Path, capsys) -> None:
    save = tmp_path / "exp"
    save.mkdir()
    _leave_a_run(save)
    prepare_save_dir(save, run_identity(_train(tmp_path), {}))
    assert "settings or data changed (no recorded settings)" in capsys.readouterr().out


def test_a_run_at_exactly_its_budget_resumes_and_an_update_budget_ignores_epochs(tmp_path: Path) -> None:
    """A finished run (update == max_update) rerun as typed is the same run, not past its budget;
    without an epoch budget the epoch it reached does not count."""
    save = tmp_path / "exp"
    identity = run_identity(_train(tmp_path, max_update=100, max_epoch=0), {})
    prepare_save_dir(save, identity)
    _log(save, json.dumps({"update": 100, "epoch": 7}))
    assert prepare_save_dir(save, identity) == "resume"
    assert not (save / SUPERSEDED_DIR).exists()


def test_one_process_by_default_and_paths_digest_as_their_text(tmp_path: Path) -> None:
    single = run_identity(_train(tmp_path, max_tokens=4096, update_freq=2), {})
    assert single["train"]["tokens_per_update"] == 4096 * 2  # world size 1 unless given
    assert (
        run_identity(_train(tmp_path, max_tokens=4096), {})["train"]["tokens_per_update"] == 4096
    )  # no accumulation
    as_path = run_identity(_train(tmp_path, spm_model=Path("/m/spm.model")), {})
    as_text = run_identity(_train(tmp_path, spm_model="/m/spm.model"), {})
    assert as_path["id"] == as_text["id"]
