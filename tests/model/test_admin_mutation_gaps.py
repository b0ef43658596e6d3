"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/model/admin.py: each pins
a behaviour that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pipeline_lib.errors import CheckpointError
from pipeline_lib.model import build_model
from pipeline_lib.model.admin import AdminProfile, apply_profile, closed_form_profile, resolve_profile

# -- Admin profiling and profile files (pipeline_lib/model/admin.py) -----------------------------


def test_admin_profile_file_round_trips_every_field(tmp_path: Path) -> None:
    from tests.model.test_admin import admin_config, profiled

    for profile in (profiled()[1], profiled(recursion="cumulative")[1], closed_form_profile(admin_config())):
        path = tmp_path / f"{profile.method}-{profile.recursion}.json"
        profile.save(path)
        # the exact bytes of json.dump(indent=2): a run's identity holds the file's sha256
        assert path.read_text(encoding="utf-8") == json.dumps(profile.to_json(), indent=2)
        assert set(json.loads(path.read_text(encoding="utf-8"))) == {
            "format", "method", "recursion", "model_config", "omegas", "variances", "residual_variances", "batch"
        }  # fmt: skip
        assert AdminProfile.load(path) == profile
    reference, cumulative = profiled()[1], profiled(recursion="cumulative")[1]
    assert (reference.method, reference.batch, reference.recursion) == (
        "profiled",
        {"sentences": 8},
        "reference",
    )
    assert len(reference.residual_variances["encoder"]) == 8
    assert cumulative.residual_variances == {}  # the cumulative recursion measures no residual stream
    closed = closed_form_profile(admin_config())
    assert (closed.method, closed.model_config, closed.recursion) == (
        "closed_form",
        admin_config().to_dict(),
        None,
    )


def test_admin_profile_files_written_before_the_recursion_key_read_as_cumulative(tmp_path: Path) -> None:
    from tests.model.test_admin import admin_config, profiled

    for profile, want in ((profiled()[1], "cumulative"), (closed_form_profile(admin_config()), None)):
        data = profile.to_json()
        del data["recursion"], data["residual_variances"]
        path = tmp_path / f"old-{profile.method}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        loaded = AdminProfile.load(path)
        assert loaded.recursion == want and loaded.residual_variances == {}
    not_a_profile = tmp_path / "list.json"
    not_a_profile.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CheckpointError, match="is not an Admin profile"):
        AdminProfile.load(not_a_profile)


def test_cumulative_profiling_measures_the_branches_at_omega_one() -> None:
    """Var f_i as an independent forward pass of the same batch and dropout draws sees it, with every ω
    at 1 (the cumulative recursion keeps ω fixed while it measures)."""
    from tests.model.test_admin import admin_config, loss_of, profiled, sample_batch

    seed = 5
    model, profile = profiled(seed, "cumulative")
    seen: dict[str, list[float]] = {"encoder": [], "decoder": []}
    handles = [
        connection.branch_output.register_forward_hook(
            lambda m, i, out, name=name: seen[name].append(out.detach().double().var(correction=0).item())
        )
        for name in seen
        for connection in getattr(model, name).connections()
    ]
    torch.manual_seed(seed)  # profiled() drew the model from the seed, then the dropout masks
    build_model(admin_config())
    model.train()
    loss_of(model, sample_batch(seed))
    for handle in handles:
        handle.remove()
    for name, variances in seen.items():
        assert profile.variances[name] == pytest.approx(variances, rel=1e-5), name


def test_resolve_profile_combinations(tmp_path: Path) -> None:
    from tests.model.test_admin import admin_config

    plain = admin_config(residual="post_ln")
    assert resolve_profile(plain, None, False) is None
    for path, closed in (("p.json", False), (None, True)):
        with pytest.raises(CheckpointError, match="takes no profile"):
            resolve_profile(plain, path, closed)
    config = admin_config()
    assert resolve_profile(config, None, True) == closed_form_profile(config)
    with pytest.raises(CheckpointError, match="needs --admin-profile"):
        resolve_profile(config, None, False)
    good = tmp_path / "good.json"
    closed_form_profile(config).save(good)
    assert resolve_profile(config, str(good), False) == closed_form_profile(config)
    other = tmp_path / "other.json"
    closed_form_profile(admin_config(encoder_layers=6)).save(other)
    with pytest.raises(CheckpointError, match=f"^Admin profile {other} was taken for encoder_layers=6"):
        resolve_profile(config, str(other), False)
    with pytest.raises(CheckpointError, match="^profile was taken for encoder_layers=6"):
        apply_profile(build_model(config), AdminProfile.load(other))
