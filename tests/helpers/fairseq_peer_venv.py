"""Where the fairseq peer venv lives (`bench/peers/install.sh fairseq`) and when the peer oracles run:
only under `make test-peers` (DEEPNMT_TEST_PEERS=1), and only where the venv is installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("DEEPNMT_BENCH_CACHE", Path.home() / ".cache" / "deepnmt-bench"))
PEER = CACHE / "venvs" / "fairseq"
PEER_MARKS = [
    pytest.mark.skipif(os.environ.get("DEEPNMT_TEST_PEERS") != "1", reason="peer oracles: make test-peers"),
    pytest.mark.skipif(
        not (PEER / ".deepnmt-bench-installed").is_file(),
        reason=f"no fairseq peer venv at {PEER} (bench/peers/install.sh fairseq)",
    ),
]


def peer_env(threads: int) -> dict[str, str]:
    """fairseq 0.12's torch.load of a checkpoint with an argparse Namespace needs the pre-2.6 default."""
    return {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "OMP_NUM_THREADS": str(threads)}
