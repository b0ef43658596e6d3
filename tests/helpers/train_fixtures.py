"""Tiny synthetic binarized corpora for the trainer tests (written with the real IndexedDataset writer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_lib.data.indexed import split_prefix, write_dataset
from pipeline_lib.data.vocab import Vocabulary


def make_bin_dir(
    root: Path, n_train: int = 96, n_valid: int = 16, vocab_words: int = 20, seed: int = 0
) -> Path:
    """A learnable toy task: the target is the source reversed with every id shifted by one."""
    rng = np.random.default_rng(seed)
    vocab = Vocabulary([f"w{i}" for i in range(vocab_words)])
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    vocab.save(bin_dir / "vocab.txt")
    first, last = vocab.nspecial, len(vocab) - 1
    for split, n in (("train", n_train), ("valid", n_valid)):
        src, tgt = [], []
        for _ in range(n):
            length = int(rng.integers(3, 9))
            ids = rng.integers(first, last, size=length)
            src.append(ids.tolist())
            tgt.append((ids[::-1] + 1).tolist())
        write_dataset(split_prefix(bin_dir, split, "xx"), src)
        write_dataset(split_prefix(bin_dir, split, "yy"), tgt)
    meta = {"src_lang": "xx", "tgt_lang": "yy", "vocab_sha256": vocab.sha256(), "vocab_size": len(vocab)}
    (bin_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return bin_dir


TINY_MODEL = [
    "--arch", "base", "--d-model", "32", "--ffn-dim", "64", "--heads", "2",
    "--encoder-layers", "2", "--decoder-layers", "2",
]  # fmt: skip


def train_args(bin_dir: Path, save_dir: Path, *extra: str) -> list[str]:
    return [
        "train", "--data", str(bin_dir), "--source-lang", "xx", "--target-lang", "yy",
        "--save-dir", str(save_dir), *TINY_MODEL, "--device", "cpu", "--num-threads", "1",
        "--lr", "3e-3", "--warmup-updates", "10", "--max-tokens", "200", "--log-interval", "1",
        "--progress", "none", *extra,
    ]  # fmt: skip


def read_log(save_dir: Path, kind: str = "train") -> list[dict]:
    path = save_dir / "train_log.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("kind") == kind]


def save_decoding_checkpoint(
    model: Any, vocab: Vocabulary, bin_dir: Path, langs: tuple[str, str], num_updates: int, root: Path
) -> Path:
    """``root/checkpoint_last.pt`` holding only what decoding and export read (no optimizer state)."""
    from pipeline_lib.checkpoint import save_checkpoint

    state = {
        "model_config": model.config.to_dict(),
        "model": model.state_dict(),
        "vocab_sha256": vocab.sha256(),
        "data": {"bin_dir": str(bin_dir), "src_lang": langs[0], "tgt_lang": langs[1]},
        "train_config": {},
        "num_updates": num_updates,
        "epoch": 1,
        "optimizer": None,
        "scheduler": None,
        "scaler": None,
        "iterator": {"epoch": 1, "batch_index": 0},
        "admin_profile": None,
        "status": "ok",
    }
    path = root / "checkpoint_last.pt"
    save_checkpoint(state, path)
    return path
