"""Experiments of a config: the listed ones plus the generated stability-map runs."""

from __future__ import annotations

from typing import Any

from pipeline_lib.errors import ConfigError


def lr_tag(lr: float) -> str:
    return f"{lr:g}"


def stability_experiments(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Admin Fig. 10 grid: method x lr x depth, short runs named stability-<method>-<E>L<D>L-lr<lr>."""
    runs = {}
    for method in spec["methods"]:
        for lr in spec["lrs"]:
            for depth in spec["depths"]:
                enc, dec = (int(x) for x in depth.split("-"))
                overrides = {"lr": lr, "max_update": spec["max_update"], "max_epoch": 0}
                if "warmup_updates" in spec:
                    overrides["warmup_updates"] = spec["warmup_updates"]
                runs[f"stability-{method}-{enc}L{dec}L-lr{lr_tag(lr)}"] = {
                    "dataset": spec["dataset"],
                    "encoder_layers": enc,
                    "decoder_layers": dec,
                    "width": spec["width"],
                    "residual": method,
                    "recipe": spec["recipe"],
                    "seed": spec.get("seed", 1),
                    "overrides": overrides,
                    "stability": {"method": method, "lr": lr, "depth": depth},
                }
    return runs


def all_experiments(config: dict[str, Any]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(every experiment, the stability runs among them); a listed name may not shadow a generated one."""
    spec = config.get("stability_map")
    stability = stability_experiments(spec) if spec else {}
    for name in config["experiments"]:
        if name in stability:
            raise ConfigError(
                f"config key 'experiments.{name}': name clashes with a generated stability_map run",
                key=f"experiments.{name}",
            )
    return {**config["experiments"], **stability}, stability
