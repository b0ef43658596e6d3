"""fairseq as the oracle of our forward pass and beam search, on exported weights (`make test-peers`).

Runs in the peer venv that `bench/peers/install.sh fairseq` builds; skipped when it is absent. For a
post-LN, a pre-LN and an Admin model folded into post-LN: fairseq's log-probabilities on a padded
batch equal ours to 1e-5, and fairseq-generate (binarized with fairseq-preprocess from our dictionary)
gives our `translate`'s hypotheses with the same beam, length penalty and length limits.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from export_fixtures import MAX_LEN_B, TOKENS, save_toy_checkpoint, token_lines, toy_sources, train_toy_model

from pipeline_lib.cli import main as cli_main
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.search import BOS, SearchConfig
from pipeline_lib.decode.translator import collate_sources, translate
from pipeline_lib.export.fairseq import fairseq_ids, generate_hypotheses

CACHE = Path(os.environ.get("DEEPNMT_BENCH_CACHE", Path.home() / ".cache" / "deepnmt-bench"))
PEER = CACHE / "venvs" / "fairseq"
pytestmark = [
    pytest.mark.skipif(os.environ.get("DEEPNMT_TEST_PEERS") != "1", reason="peer oracles: make test-peers"),
    pytest.mark.skipif(
        not (PEER / ".deepnmt-bench-installed").is_file(),
        reason=f"no fairseq peer venv at {PEER} (bench/peers/install.sh fairseq)",
    ),
]
# fairseq 0.12's torch.load of a checkpoint with an argparse Namespace needs the pre-2.6 default
ENV = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "OMP_NUM_THREADS": "2"}
UPDATES = 90


@pytest.fixture(scope="module", params=["post_ln", "pre_ln", "admin"])
def exported(request, tmp_path_factory):
    torch.set_num_threads(2)
    model = train_toy_model(request.param, updates=UPDATES)
    root = tmp_path_factory.mktemp(request.param)
    checkpoint = save_toy_checkpoint(model, root)
    out = root / "fairseq"
    assert (
        cli_main(["export", "--checkpoint", str(checkpoint), "--format", "fairseq", "--out", str(out)]) == 0
    )
    return model, out


def _shifted(ids: list[int]) -> list[int]:
    return [(i - 4 + 1) % (len(TOKENS)) + 4 for i in ids]


def test_forward_log_probs_equal_fairseqs(exported, tmp_path):
    model, out = exported
    sources = toy_sources(16, seed=5)  # lengths 2..10: padding on both sides
    targets = [_shifted(s)[: max(1, len(s) - i % 3)] for i, s in enumerate(sources)]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"src": sources, "tgt": targets}), encoding="utf-8")  # ids >= 4: same in both
    result = tmp_path / "lprobs.npy"
    script = Path(__file__).parents[1] / "helpers" / "fairseq_peer_forward.py"
    subprocess.run(
        [str(PEER / "bin" / "python"), str(script), str(out), str(batch), str(result)], check=True, env=ENV
    )
    theirs = torch.from_numpy(np.load(result))

    src = collate_sources(sources, torch.device("cpu"))
    prev = torch.zeros(len(targets), max(map(len, targets)) + 1, dtype=torch.long)
    for i, t in enumerate(targets):
        prev[i, 0], prev[i, 1 : len(t) + 1] = BOS, torch.tensor(t)
    with torch.no_grad():
        ours = F.log_softmax(model(src, prev).float(), dim=-1)[..., fairseq_ids(model.config.tgt_vocab_size)]
    assert theirs.shape == ours.shape
    worst = max(
        float((ours[i, : len(t) + 1] - theirs[i, : len(t) + 1]).abs().max()) for i, t in enumerate(targets)
    )
    print(f"{model.config.residual}: max |d log-prob| vs fairseq = {worst:.2e}")
    assert worst <= 1e-5


def _run(tool: str, *args: str) -> str:
    cmd = [str(PEER / "bin" / tool), *args]
    return subprocess.run(cmd, check=True, env=ENV, capture_output=True, text=True).stdout


@pytest.mark.parametrize("lenpen", [1.0, 0.6])
def test_fairseq_generate_gives_our_hypotheses(exported, tmp_path, lenpen):
    model, out = exported
    sources = toy_sources(100)
    raw = tmp_path / "raw"
    raw.mkdir()
    for lang, rows in (("xx", token_lines(sources)), ("yy", token_lines([_shifted(s) for s in sources]))):
        (raw / f"test.{lang}").write_text("".join(" ".join(r) + "\n" for r in rows), encoding="utf-8")
    data = tmp_path / "data"
    _run(
        "fairseq-preprocess", "-s", "xx", "-t", "yy", "--srcdict", str(out / "dict.xx.txt"),
        "--tgtdict", str(out / "dict.yy.txt"), "--testpref", str(raw / "test"), "--destdir", str(data),
        "--workers", "1",
    )  # fmt: skip
    log = _run(
        "fairseq-generate", str(data), "--path", str(out / "checkpoint.pt"), "--gen-subset", "test",
        "-s", "xx", "-t", "yy", "--beam", "4", "--nbest", "1", "--lenpen", str(lenpen),
        "--max-len-a", "0", "--max-len-b", str(MAX_LEN_B), "--min-len", "1", "--batch-size", "32",
        "--required-batch-size-multiple", "1", "--cpu", "--seed", "1",
    )  # fmt: skip
    theirs = generate_hypotheses(log)
    cfg = SearchConfig(beam=4, lenpen=lenpen, max_len_b=MAX_LEN_B, min_len=1)
    ours = translate(model, sources, cfg, progress=False)
    vocab = Vocabulary(TOKENS)
    same = 0
    for i, nbest in enumerate(ours):
        score, text = theirs[i]
        if text == vocab.string(nbest[0].tokens):
            same += 1
            assert score == pytest.approx(nbest[0].score / math.log(2), abs=1e-4)  # fairseq prints base 2
    print(f"{model.config.residual} lenpen {lenpen}: {same}/{len(sources)} identical to fairseq-generate")
    assert same == len(sources)
