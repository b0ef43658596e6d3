"""Smoke-test scale: the same DAG as a paper config, every job shrunk to minutes.

A config with a ``smoke:`` section (``config.smoke.yaml`` holds one; add it after a paper config:
``--configfile config.wmt14_en_fr.yaml config.smoke.yaml``) keeps every dataset, experiment, table and
rule of the paper config, and changes only sizes:

* every width becomes ``d_model``/``ffn_dim``/``heads`` of the smoke section (depths stay: a 60-layer
  encoder is still built, profiled, trained, averaged and decoded);
* every recipe (and every experiment's overrides of these keys) trains ``max_epoch`` epochs of at
  most ``max_tokens`` tokens, ``update_freq`` 1, with at most ``warmup_updates`` of warm-up (so that
  the few updates it has do move the model);
* back-translation runs in at most ``bt_shards`` shards of ``mono_lines`` lines in all;
* every stability-map run trains at most ``map_updates`` updates (the map's runs count updates, not
  epochs: Figure 10's grid is 100k updates a run);
* preprocessing keeps the first ``train_lines`` training pairs, BPE learns ``bpe_merges`` merges,
  News Crawl stops after ``mono_lines`` lines;
* with ``gpu: false`` every GPU/node/launcher resource is dropped (a laptop or a CPU CI machine) and
  mixed precision is off; with ``gpu: true`` (default) jobs keep their GPU shape, to try the cluster;
* results and working files go to ``<workdir>/smoke`` and ``<results>/smoke``, so nothing of the real
  run is reused or overwritten.
"""

from __future__ import annotations

import copy
from typing import Any

GPU_KEYS = ("gpu", "gpu_model", "nodes", "tasks_per_node", "mpi")


def apply_smoke(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` at the size its ``smoke`` section asks for (``config`` itself if none)."""
    smoke = config.get("smoke")
    if not smoke:
        return config
    out = copy.deepcopy(config)
    out["workdir"] = f"{config['workdir']}/smoke"
    out["results"] = f"{config['results']}/smoke"
    if config.get("logs"):
        out["logs"] = f"{config['logs']}/smoke"
    for width in out["widths"].values():
        width.update({k: smoke[k] for k in ("d_model", "ffn_dim", "heads")})
    for recipe in out["recipes"].values():
        recipe.pop("max_update", None)
        recipe.update(max_epoch=smoke["max_epoch"], max_tokens=smoke["max_tokens"], update_freq=1)
        recipe["warmup_updates"] = min(recipe.get("warmup_updates", 0), smoke["warmup_updates"])
        recipe["average_last"] = min(recipe.get("average_last", 1), smoke["max_epoch"])
        if "average_upper_bound" in recipe:
            recipe["average_upper_bound"] = smoke["max_epoch"]
        if not smoke["gpu"]:
            recipe["amp"] = "none"
    for exp in out["experiments"].values():
        overrides = exp.get("overrides", {})
        shrunk = {"max_epoch": smoke["max_epoch"], "max_tokens": smoke["max_tokens"], "update_freq": 1}
        overrides.update({k: v for k, v in shrunk.items() if k in overrides})
        overrides.pop("max_update", None)
        if "warmup_updates" in overrides:
            overrides["warmup_updates"] = min(overrides["warmup_updates"], smoke["warmup_updates"])
        if "average_last" in overrides:
            overrides["average_last"] = min(overrides["average_last"], smoke["max_epoch"])
        if "average_upper_bound" in overrides:
            overrides["average_upper_bound"] = smoke["max_epoch"]
        if "amp" in overrides and not smoke["gpu"]:
            overrides["amp"] = "none"
    if out.get("stability_map"):
        spec = out["stability_map"]
        spec["max_update"] = min(spec["max_update"], smoke["map_updates"])
    for bt in out.get("backtranslation", {}).values():
        bt["shards"] = min(bt.get("shards", 1), smoke["bt_shards"])
    for ds in out["datasets"].values():
        ds.setdefault("preprocess", {})["max_train_lines"] = smoke["train_lines"]
        if ds.get("subword", {}).get("kind", "bpe") == "bpe":
            ds.setdefault("subword", {})["merges"] = smoke["bpe_merges"]
        if isinstance(ds.get("mono"), dict):
            ds["mono"]["max_lines"] = smoke["mono_lines"]
    if not smoke["gpu"]:
        _drop_gpu(out["resources"])
        for exp in out["experiments"].values():
            _drop_gpu(exp.get("resources", {}))
        for rule in ("train", "translate", "profile_admin"):
            out["resources"].setdefault(rule, {})["gpu"] = 0
    return out


def _drop_gpu(resources: dict[str, dict[str, Any]]) -> None:
    for rule_resources in resources.values():
        for key in GPU_KEYS:
            rule_resources.pop(key, None)
