"""What decides a training run's result, and what to do with a save dir left by another run.

A save dir holds one run. Re-running the same command resumes it (an interrupted run picks up where it
stopped); running a command whose settings or data differ sets the old run aside under
``superseded/<time>-<identity>/`` and starts afresh, so a checkpoint is never resumed under settings it
was not trained with, and nothing computed is deleted.

The identity is a digest of every model and training setting except those that only say how to run
(threads, device, progress, logging, checkpoint retention, equivalent fast paths), of the binarized
data's content (binarize's per-split digests and vocabulary) and of the Admin profile's content.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from pipeline_lib.atomic import move, write_json
from pipeline_lib.digest import file_digest

IDENTITY_FILE = "run_identity.json"
TRAINED_FILE = "trained.json"  # the workflow's marker: written once the run has concluded
SUPERSEDED_DIR = "superseded"
# Files of the save dir that are not the run's own: inputs written by other stages, and the archive.
NOT_THE_RUNS = frozenset({"admin_profile.json", SUPERSEDED_DIR})

# Settings that change how a run is executed, not what it computes (the fast paths are tested equal
# to eager: tests/model/test_compile.py, tests/train/test_deferred_stats.py, tests/model/test_checkpointing.py).
RUNTIME_FIELDS = frozenset(
    {
        "data",  # the path: the data's content is part of the identity instead
        "save_dir",
        "admin_profile",  # the path: its content is part of the identity instead
        "device",
        "num_threads",
        "cpu_workers",
        "cpu_gemm",
        "compile",
        "compile_mode",
        "deferred_stats",
        "checkpoint_activations",
        "progress",
        "progress_interval",
        "progress_fd",
        "log_interval",
        "keep_interval_updates",
        "keep_last_epochs",
        "validate_interval_updates",  # more dev points; the trained model is the same
        "patience",  # like the budget, where the run stops, not what its updates compute
    }
)
# Model settings added after runs existed, at the default that computes what those runs computed: left
# out of the identity at that default, so a run started before the field existed keeps its id.
LATER_MODEL_DEFAULTS = {"decoder_residual": ""}
DATA_SPLITS = ("train", "valid")
# The budget says where a run stops, not what its updates compute, as long as the learning rate does
# not depend on it: raising it continues the run. A schedule that decays to the budget (fairseq's
# linear/cosine/polynomial/tri-stage) makes it part of the identity.
BUDGET_FIELDS = ("max_update", "max_epoch")
BUDGET_SCHEDULES = frozenset({"linear", "cosine", "polynomial_decay", "tri_stage"})


def data_identity(bin_dir: Path, splits: tuple[str, ...] = DATA_SPLITS) -> dict[str, Any]:
    """The binarized training data as binarize describes it: vocabulary and, per split, the digests
    of the id files (older directories without digests: their whole meta.json)."""
    meta_path = bin_dir / "meta.json"
    if not meta_path.is_file():
        return {"meta": None}
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    stats = meta.get("splits", {})
    if not all(any(k.endswith("_sha256") for k in stats[s]) for s in splits if s in stats):
        return {"meta_sha256": file_digest(meta_path)}
    return {"vocab_sha256": meta.get("vocab_sha256"), "splits": {s: stats.get(s) for s in splits}}


def _digest(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_identity(train: dict[str, Any], model: dict[str, Any], world_size: int = 1) -> dict[str, Any]:
    """The settings and inputs that decide the result; ``train``/``model`` are the configs as dicts,
    ``world_size`` the data-parallel processes. The batch enters as the target tokens per update,
    ``max_tokens x update_freq x world_size`` (fairseq's effective batch: the schedule and the learning
    rate are per update), not as its split: a run moved to cards of another size, reshaped to the same
    tokens per update (pipeline_lib/workflow/card_shape.py), resumes as the same experiment.
    ``aliases`` holds the id an older version gave the same run (the split in place of the product),
    so that a run started before this rule also resumes."""
    budget_free = train.get("lr_scheduler") not in BUDGET_SCHEDULES
    settings = {
        k: v for k, v in train.items() if k not in RUNTIME_FIELDS and not (budget_free and k in BUDGET_FIELDS)
    }
    profile = train.get("admin_profile")
    model = {k: v for k, v in model.items() if k not in LATER_MODEL_DEFAULTS or v != LATER_MODEL_DEFAULTS[k]}
    inputs = {
        "model": model,
        "data": data_identity(Path(train["data"])),
        "admin_profile_sha256": file_digest(Path(profile)) if profile and Path(profile).is_file() else None,
    }
    legacy = _digest({"train": settings, **inputs})
    if "max_tokens" in settings:
        per_update = settings.pop("max_tokens") * settings.pop("update_freq", 1) * world_size
        settings["tokens_per_update"] = per_update
    identity = {"train": settings, **inputs}
    budget = {k: train.get(k) for k in BUDGET_FIELDS}
    return {"id": _digest(identity), **identity, "budget": budget, "aliases": [legacy]}


def _position(save_dir: Path) -> tuple[int, int] | None:
    """(update, epoch) the run in ``save_dir`` last logged, from the end of its train_log.jsonl."""
    path = save_dir / "train_log.jsonl"
    if not path.is_file():
        return None
    for line in reversed(path.read_text(encoding="utf-8").splitlines()):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "update" in rec:
            return int(rec["update"]), int(rec.get("epoch") or 0)
    return None


def past_budget(save_dir: Path, budget: dict[str, Any]) -> bool:
    """Whether the run in ``save_dir`` has gone beyond ``budget`` (resuming could not undo that)."""
    pos = _position(save_dir)
    if pos is None:
        return False
    max_update, max_epoch = budget.get("max_update") or 0, budget.get("max_epoch") or 0
    return bool((max_update and pos[0] > max_update) or (max_epoch and pos[1] > max_epoch))


def _run_files(save_dir: Path) -> list[Path]:
    return sorted(p for p in save_dir.iterdir() if p.name not in NOT_THE_RUNS)


def changed_settings(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted names of what differs (``train.lr``, ``data``), for the log line."""
    out = []
    for part in ("train", "model"):
        a, b = old.get(part, {}), new.get(part, {})
        out += [f"{part}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    out += [k for k in ("data", "admin_profile_sha256") if old.get(k) != new.get(k)]
    return out


def prepare_save_dir(save_dir: Path, identity: dict[str, Any]) -> str:
    """Make ``save_dir`` hold this run: ``'new'``, ``'resume'`` (same identity) or ``'superseded'``
    (another run's files moved aside). Writes the identity file. Main rank only."""
    save_dir.mkdir(parents=True, exist_ok=True)
    path = save_dir / IDENTITY_FILE
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    files = [p for p in _run_files(save_dir) if p.name != IDENTITY_FILE]
    same = old is not None and old.get("id") in (identity["id"], *identity.get("aliases", []))
    if same and not past_budget(save_dir, identity["budget"]):
        if old.get("id") != identity["id"] or old.get("budget") != identity["budget"]:
            write_json(path, identity)  # an alias' run takes the current id: a later split change resumes too
        return "resume"
    if not files:  # nothing of another run to keep (at most its identity file)
        write_json(path, identity)
        return "new"
    tag = (old or {}).get("id", "unrecorded")
    archive = save_dir / SUPERSEDED_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}-{tag}"
    archive.mkdir(parents=True)
    for p in _run_files(save_dir):
        move(p, archive / p.name)
    what = (
        ", ".join(changed_settings(old, identity) or ["a smaller budget"]) if old else "no recorded settings"
    )
    print(
        f"{save_dir}: settings or data changed ({what}); the previous run moved to {archive}; starting afresh"
    )
    write_json(path, identity)
    return "superseded"
