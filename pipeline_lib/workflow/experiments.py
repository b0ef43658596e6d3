"""Experiments of a config: the listed ones plus the generated stability-map runs."""

from __future__ import annotations

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


def all_experiments(config: dict[str, Any]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(every experiment, the stability runs among them); a listed name may not shadow a generated one."""
    spec = config.get("stability_map")
    stability = stability_experiments(spec, config.get("recipes", {})) if spec else {}
    for name in config["experiments"]:
        if name in stability:
            raise ConfigError(
                f"config key 'experiments.{name}': name clashes with a generated stability_map run",
                key=f"experiments.{name}",
            )
    return {**config["experiments"], **stability}, stability
