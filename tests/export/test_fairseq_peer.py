"""fairseq as the oracle of our forward pass and beam search, on exported weights (`make test-peers`).

Runs in the peer venv that `bench/peers/install.sh fairseq` builds; skipped when it is absent. For a
post-LN, a pre-LN and an Admin model folded into post-LN: fairseq's log-probabilities on a padded
batch equal ours to 1e-5, and fairseq-generate (binarized with fairseq-preprocess from our dictionary)
gives our `translate`'s hypotheses with the same beam, length penalty and length limits.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from export_fixtures import MAX_LEN_B, TOKENS, save_toy_checkpoint, token_lines, toy_sources, train_toy_model
from fairseq_peer_venv import PEER, PEER_MARKS, peer_env

from pipeline_lib.cli import main as cli_main
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.search import BOS, SearchConfig
from pipeline_lib.decode.translator import collate_sources, translate
from pipeline_lib.export.fairseq import fairseq_ids, generate_hypotheses

pytestmark = PEER_MARKS
ENV = peer_env(threads=2)
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


def test_tokenized_bleu_equals_fairseq_generate_bleu4(exported, tmp_path):
    """tok_bleu from our generate file equals the BLEU4 line of fairseq-generate --remove-bpe, with
    reference words outside the dictionary (fairseq scores them as <<unk>>) and BPE pieces."""
    model, out = exported
    sources = toy_sources(120, seed=11)
    vocab = Vocabulary(TOKENS)
    cfg = SearchConfig(beam=4, lenpen=1.0, max_len_b=MAX_LEN_B, min_len=1)
    hyps = translate(model, sources, cfg, progress=False)  # fairseq-generate's own, by the test above
    # references near the hypotheses (a toy model's BLEU4 against the shifted sources is 0), with
    # unknown words, unknown BPE pieces and dropped tokens
    refs = []
    for i, nbest in enumerate(hyps):
        row = vocab.decode(nbest[0].tokens)
        if i % 3 == 0 and len(row) > 2:
            row = row[:-1]
        if i % 4 == 0:
            row[len(row) // 2] = f"oov{i}"  # an unknown word
        if i % 5 == 0:
            row.insert(0, "oov@@")  # an unknown BPE piece glued to the next word
        refs.append(row)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "test.xx").write_text("".join(" ".join(r) + "\n" for r in token_lines(sources)), encoding="utf-8")
    (raw / "test.yy").write_text("".join(" ".join(r) + "\n" for r in refs), encoding="utf-8")
    data = tmp_path / "data"
    _run(
        "fairseq-preprocess", "-s", "xx", "-t", "yy", "--srcdict", str(out / "dict.xx.txt"),
        "--tgtdict", str(out / "dict.yy.txt"), "--testpref", str(raw / "test"), "--destdir", str(data),
        "--workers", "1",
    )  # fmt: skip
    log = _run(
        "fairseq-generate", str(data), "--path", str(out / "checkpoint.pt"), "--gen-subset", "test",
        "-s", "xx", "-t", "yy", "--beam", "4", "--nbest", "1", "--lenpen", "1.0", "--remove-bpe",
        "--max-len-a", "0", "--max-len-b", str(MAX_LEN_B), "--min-len", "1", "--batch-size", "32",
        "--required-batch-size-multiple", "1", "--cpu", "--seed", "1",
    )  # fmt: skip
    assert "<<unk>>" in log  # the T lines carry the escaped unknown words
    (bleu4,) = [line.split("BLEU4 = ")[1] for line in log.splitlines() if "BLEU4 = " in line]
    theirs = float(bleu4.split(",")[0])

    # what `translate --output-generate` writes on a binarized split: T = the reference's ids read back
    # through the vocabulary (unknown -> <unk>), H = the model's subwords
    lines = []
    for i, (ref, nbest) in enumerate(zip(refs, hyps, strict=True)):
        lines += [
            f"T-{i}\t{vocab.string(vocab.encode(ref))}",
            f"H-{i}\t{nbest[0].score}\t{vocab.string(nbest[0].tokens)}",
        ]
    gen = tmp_path / "test.generate"
    gen.write_text("\n".join(lines) + "\n", encoding="utf-8")
    hyp_text, ref_text = tmp_path / "test.hyp", tmp_path / "test.yy"
    hyp_text.write_text(
        "".join(vocab.string(n[0].tokens).replace("@@ ", "") + "\n" for n in hyps), encoding="utf-8"
    )
    ref_text.write_text("".join(" ".join(r).replace("@@ ", "") + "\n" for r in refs), encoding="utf-8")
    score = tmp_path / "score.json"
    argv = ["score", "--hyp", str(hyp_text), "--ref", str(ref_text), "--generate", str(gen)]
    assert cli_main([*argv, "--metrics", "tok_bleu", "--output", str(score)]) == 0
    ours = json.loads(score.read_text())["scores"]["tok_bleu"]
    print(f"{model.config.residual}: tok_bleu {ours['score']:.4f} vs fairseq-generate BLEU4 {theirs:.2f}")
    print(f"  ours:   {ours['fairseq']}\n  theirs: BLEU4 = {bleu4}")
    assert 5 < theirs < 100
    assert ours["score"] == pytest.approx(theirs, abs=0.01)
    assert ours["fairseq"] == f"BLEU4 = {bleu4}"
