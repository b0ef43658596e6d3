"""Experiments of a config: the listed ones (a seed group expanded into a run per seed) plus the
generated stability-map runs."""

from __future__ import annotations

import copy
from typing import Any

from pipeline_lib.errors import ConfigError


def lr_tag(lr: float) -> str:
    return f"{lr:g}"


def beta2_tag(beta2: float) -> str:
    return f"{beta2:g}"


def stability_experiments(spec: dict[str, Any], recipes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Admin Fig. 10 grid: method x depth x lr x Adam beta2 x seed, short runs named
    stability-<method>-<E>L<D>L-lr<lr>-b<beta2>-s<seed>."""
    base_betas = recipes[spec["recipe"]].get("adam_betas", [0.9, 0.98])
    runs = {}
    for method in spec["methods"]:
        for depth in spec["depths"]:
            enc, dec = (int(x) for x in depth.split("-"))
            for lr in spec["lrs"]:
                for beta2 in spec.get("betas2", [base_betas[1]]):
                    for seed in spec.get("seeds", [1]):
                        overrides = {
                            "lr": lr,
                            "adam_betas": [base_betas[0], beta2],
                            "max_update": spec["max_update"],
                            "max_epoch": 0,
                        }
                        if "warmup_updates" in spec:
                            overrides["warmup_updates"] = spec["warmup_updates"]
                        name = f"stability-{method}-{enc}L{dec}L-lr{lr_tag(lr)}-b{beta2_tag(beta2)}-s{seed}"
                        runs[name] = {
                            "dataset": spec["dataset"],
                            "encoder_layers": enc,
                            "decoder_layers": dec,
                            "width": spec["width"],
                            "residual": method,
                            "recipe": spec["recipe"],
                            "seed": seed,
                            "overrides": overrides,
                            "stability": {
                                "method": method,
                                "lr": lr,
                                "beta2": beta2,
                                "depth": depth,
                                "seed": seed,
                            },
                        }
    return runs


def seed_run_name(group: str, seed: int) -> str:
    """The run of one seed of a seed group: ``<group>-s<seed>``."""
    return f"{group}-s{seed}"


def seed_groups(listed: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Group name -> its runs, one per seed in the order given, for every listed experiment with
    ``seeds`` (a paper row that is a mean over training runs)."""
    return {
        name: [seed_run_name(name, seed) for seed in exp["seeds"]]
        for name, exp in listed.items()
        if "seeds" in exp
    }


def expand_seeds(listed: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The listed experiments with each seed group replaced by its runs, each with its own ``seed``
    (and every other key of the group, so every rule runs per seed unchanged)."""
    out: dict[str, dict[str, Any]] = {}
    for name, exp in listed.items():
        if "seeds" not in exp:
            out[name] = exp
            continue
        if "seed" in exp:
            fail_key(f"experiments.{name}.seed", "give either seed or seeds (one run per seed), not both")
        base = {k: v for k, v in exp.items() if k != "seeds"}
        for seed in exp["seeds"]:
            run = seed_run_name(name, seed)
            if run in listed:
                fail_key(
                    f"experiments.{name}.seeds", f"seed {seed} makes run {run!r}, a listed experiment's name"
                )
            label = {"label": f"{exp['label']}, seed {seed}"} if "label" in exp else {}
            out[run] = {**copy.deepcopy(base), **label, "seed": seed}  # no nested dict shared between runs
    return out


def fail_key(key: str, message: str) -> None:
    raise ConfigError(f"config key '{key}': {message}", key=key)


def expand_group_names(names: list[str], groups: dict[str, list[str]]) -> list[str]:
    """Table names with each seed group replaced by its runs (the runs a table reads)."""
    return list(dict.fromkeys(run for name in names for run in groups.get(name, [name])))


def all_experiments(config: dict[str, Any]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(every experiment, the stability runs among them): the listed ones with seed groups expanded
    into one run per seed, and the generated map; a listed or seed run may not shadow a map run."""
    spec = config.get("stability_map")
    stability = stability_experiments(spec, config.get("recipes", {})) if spec else {}
    listed = expand_seeds(config["experiments"])
    for name in listed:
        if name in stability:
            group = next((g for g, runs in seed_groups(config["experiments"]).items() if name in runs), None)
            key = f"experiments.{group}.seeds" if group else f"experiments.{name}"
            fail_key(key, f"run {name!r} clashes with a generated stability_map run")
    return {**listed, **stability}, stability
