"""A tiny Transformer trained on a copy task must copy with beam search; and `translate` end to end
on its checkpoint: BPE removal, Moses detokenization, all output formats, input order, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from sacremoses import MosesDetokenizer
from train_fixtures import save_decoding_checkpoint

from pipeline_lib.cli import main as cli_main
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

TOKENS = ["a@@", "b@@", "c", "d", "e", "f@@", "g", ".", ",", "h", "i", "&amp;"]
V = 4 + len(TOKENS)


def _copy_batch(gen: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lens = torch.randint(3, 9, (n,), generator=gen)
    width = int(lens.max()) + 1
    src, prev, tgt = (torch.zeros(n, width, dtype=torch.long) for _ in range(3))
    for i, length in enumerate(lens.tolist()):
        seq = torch.randint(4, V, (length,), generator=gen)
        src[i, :length], src[i, length] = seq, 2
        prev[i, 0], prev[i, 1 : length + 1] = 1, seq
        tgt[i, :length], tgt[i, length] = seq, 2
    return src, prev, tgt


@pytest.fixture(scope="module")
def copy_model():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=V, tgt_vocab_size=V, encoder_layers=2, decoder_layers=2, d_model=64,
        ffn_dim=128, heads=4, dropout=0.0, residual="pre_ln",
    )  # fmt: skip
    model = build_model(config).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(0)
    steps, warmup = 400, 50
    for step in range(1, steps + 1):
        for group in opt.param_groups:  # linear warmup, then linear decay to 0
            group["lr"] = 3e-3 * min(step / warmup, (steps - step + 1) / (steps - warmup))
        src, prev, tgt = _copy_batch(gen, 64)
        loss = F.cross_entropy(model(src, prev).view(-1, V), tgt.view(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model.eval()


def test_beam_search_copies(copy_model):
    gen = torch.Generator().manual_seed(123)  # held-out sequences
    src, _, _ = _copy_batch(gen, 200)
    sources = [row[row.gt(2)].tolist() for row in src]
    for beam in (4, 1):
        hyps = translate(
            copy_model, sources, SearchConfig(beam=beam, max_len_a=1.0, max_len_b=5), progress=False
        )
        accuracy = sum(h[0].tokens == s for h, s in zip(hyps, sources, strict=True)) / len(sources)
        assert accuracy >= 0.95, f"beam {beam}: copy accuracy {accuracy:.3f}"


@pytest.fixture(scope="module")
def checkpoint(copy_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    vocab = Vocabulary(TOKENS, list(range(100, 100 - len(TOKENS), -1)))
    vocab.save(bin_dir / "vocab.txt")
    meta = {"src_lang": "fr", "tgt_lang": "en", "subword": "bpe", "moses_tokenized": True}
    (bin_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    path = save_decoding_checkpoint(copy_model, vocab, bin_dir, ("fr", "en"), 400, root)
    return path, bin_dir


def _input_lines(n: int) -> list[str]:
    gen = torch.Generator().manual_seed(7)
    src, _, _ = _copy_batch(gen, n)
    return [" ".join(TOKENS[i - 4] for i in row[row.gt(2)].tolist()) for row in src]


def test_translate_cli_end_to_end(checkpoint, tmp_path):
    ckpt, _ = checkpoint
    lines = _input_lines(60)
    inp = tmp_path / "test.bpe.fr"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, sub, gen, jsonl = (tmp_path / name for name in ("out.en", "out.bpe", "out.gen", "out.jsonl"))
    rc = cli_main(
        ["translate", "--checkpoint", str(ckpt), "--input", str(inp), "--output", str(out),
         "--output-subword", str(sub), "--output-generate", str(gen), "--output-jsonl", str(jsonl),
         "--beam", "4", "--nbest", "2", "--lenpen", "0.6", "--max-len-a", "1", "--max-len-b", "5",
         "--max-tokens", "40", "--device", "cpu", "--no-progress"]
    )  # fmt: skip
    assert rc == 0
    subword = sub.read_text(encoding="utf-8").splitlines()
    text = out.read_text(encoding="utf-8").splitlines()
    assert len(subword) == len(text) == 2 * len(lines)  # n-best: 2 consecutive lines per input
    best_sub = subword[::2]
    assert sum(a == b for a, b in zip(best_sub, lines, strict=True)) >= 0.95 * len(lines)
    detok = MosesDetokenizer(lang="en")
    for hyp_sub, hyp_text in zip(subword, text, strict=True):
        merged = (hyp_sub + " ").replace("@@ ", "").rstrip()
        assert hyp_text == detok.detokenize(merged.split(), unescape=True)
    assert any("&" in t and "&amp;" not in t for t in text)  # Moses unescaping really happened

    records = [json.loads(x) for x in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == list(range(len(lines)))
    assert [r["source"] for r in records] == lines
    for r, i in zip(records, range(len(lines)), strict=True):
        assert [h["tokens"] for h in r["nbest"]] == subword[2 * i : 2 * i + 2]
        assert r["nbest"][0]["score"] >= r["nbest"][1]["score"]
        h = r["nbest"][0]
        assert h["score"] == pytest.approx(sum(h["positional_scores"]) / h["length"] ** 0.6, abs=1e-5)

    gen_lines = gen.read_text(encoding="utf-8").splitlines()
    s_lines = [x.split("\t") for x in gen_lines if x.startswith("S-")]
    h_lines = [x.split("\t") for x in gen_lines if x.startswith("H-")]
    assert [s[1] for s in s_lines] == lines
    assert len(h_lines) == 2 * len(lines)
    # fairseq prints base-2 scores
    assert float(h_lines[0][1]) == pytest.approx(
        records[0]["nbest"][0]["score"] / 0.6931471805599453, abs=1e-3
    )


def test_translate_subprocess_greedy_and_sampling(checkpoint, tmp_path):
    ckpt, _ = checkpoint
    lines = _input_lines(12)
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outs = []
    for extra in (["--beam", "1"], ["--sampling", "--sampling-topk", "3", "--seed", "5"]):
        out = tmp_path / f"out{len(outs)}.txt"
        cmd = [sys.executable, "-m", "pipeline_lib", "translate", "--checkpoint", str(ckpt), "--input", str(inp),
               "--output-subword", str(out), "--output", str(tmp_path / "detok.txt"), "--no-progress", *extra]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "sent/s" in proc.stderr
        outs.append(out.read_text(encoding="utf-8").splitlines())
    assert sum(a == b for a, b in zip(outs[0], lines, strict=True)) >= 0.9 * len(lines)
    assert len(outs[1]) == len(lines)


def test_translate_bad_input_keeps_previous_output(checkpoint, tmp_path, capsys):
    ckpt, bin_dir = checkpoint
    out = tmp_path / "out.txt"
    out.write_text("previous\n", encoding="utf-8")
    inp = tmp_path / "bad.txt"
    inp.write_text("c d\n" + " ".join(["c"] * 1100) + "\n", encoding="utf-8")  # > max_positions
    args = [
        "translate",
        "--checkpoint",
        str(ckpt),
        "--input",
        str(inp),
        "--output",
        str(out),
        "--no-progress",
    ]
    assert cli_main(args) == 2
    assert f"{inp}:2:" in capsys.readouterr().err
    inp.write_bytes(b"c d\n\xff e\n")
    assert cli_main(args) == 2
    assert f"{inp}:2:" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "previous\n"
    # a vocabulary that is not the one trained with
    other = tmp_path / "otherbin"
    other.mkdir()
    Vocabulary(list(reversed(TOKENS))).save(other / "vocab.txt")
    (other / "meta.json").write_text("{}", encoding="utf-8")
    inp.write_text("c d\n", encoding="utf-8")
    assert cli_main([*args, "--data-dir", str(other)]) == 2
    assert "not the vocabulary" in capsys.readouterr().err
    assert cli_main([*args, "--nbest", "9", "--beam", "2"]) == 2
    assert "--nbest" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("stdin", "message"),
    [(b"c d\nc\0 d\n", "<stdin>:2: NUL byte at column 2"), (b"c d\n\xff e\n", "<stdin>:2: invalid UTF-8")],
)
def test_translate_from_stdin_rejects_bad_bytes_naming_the_line(checkpoint, tmp_path, stdin, message):
    ckpt, _ = checkpoint
    out = tmp_path / "out.txt"
    cmd = [sys.executable, "-m", "pipeline_lib", "translate", "--checkpoint", str(ckpt), "--input", "-",
           "--output", str(out), "--no-progress"]  # fmt: skip
    proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=300)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def _translate_files(ckpt, inp, tmp_path, tag, *extra):
    out, gen = tmp_path / f"{tag}.txt", tmp_path / f"{tag}.gen"
    rc = cli_main(["translate", "--checkpoint", str(ckpt), "--input", str(inp), "--output", str(out),
                   "--output-generate", str(gen), "--beam", "3", "--device", "cpu", "--no-progress", *extra])  # fmt: skip
    assert rc == 0
    return out.read_text(encoding="utf-8").splitlines(), gen.read_text(encoding="utf-8").splitlines()


def test_shards_and_chunks_give_the_whole_inputs_translation(checkpoint, tmp_path, monkeypatch):
    """Back-translation splits its input into shards (one job each) and streams each in chunks: the
    concatenated shards equal one unsharded run, and no chunk holds more than --buffer-lines."""
    ckpt, _ = checkpoint
    lines = _input_lines(23)
    inp = tmp_path / "mono.bpe"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    whole, whole_gen = _translate_files(ckpt, inp, tmp_path, "whole")
    import pipeline_lib.decode.cli as decode_cli

    sizes: list[int] = []
    real_translate = decode_cli.translate
    monkeypatch.setattr(
        decode_cli,
        "translate",
        lambda m, ids, *a, **k: sizes.append(len(ids)) or real_translate(m, ids, *a, **k),
    )
    pieces, ids, shard_sizes = [], [], []
    for k in range(3):
        text, gen = _translate_files(ckpt, inp, tmp_path, f"s{k}", "--shard", f"{k}/3", "--buffer-lines", "4")
        pieces += text
        shard_sizes.append(len(text))
        ids += [int(x.split("\t")[0][2:]) for x in gen if x.startswith("S-")]
    assert pieces == whole
    assert shard_sizes == [7, 8, 8]  # contiguous parts, sizes within one of each other
    assert sizes and max(sizes) <= 4 and sum(sizes) == 23
    assert ids == [*range(7), *range(8), *range(8)]  # ids count from each shard's start, across chunks
    # sampling: every chunk draws from its own seeds, reproducibly
    sampled = [_translate_files(ckpt, inp, tmp_path, f"r{i}", "--sampling", "--beam", "1", "--buffer-lines", "4",
                                "--seed", "3")[0] for i in range(2)]  # fmt: skip
    assert sampled[0] == sampled[1]


def test_shard_input_is_validated_before_any_decoding(checkpoint, tmp_path, monkeypatch):
    ckpt, _ = checkpoint
    inp = tmp_path / "mono.bpe"
    inp.write_bytes(("c d\n" * 9).encode() + b"c \xff\n")
    import pipeline_lib.decode.cli as decode_cli

    calls: list[int] = []
    monkeypatch.setattr(decode_cli, "translate", lambda m, ids, *a, **k: calls.append(len(ids)))
    out = tmp_path / "out.txt"
    args = [
        "translate",
        "--checkpoint",
        str(ckpt),
        "--input",
        str(inp),
        "--output",
        str(out),
        "--no-progress",
    ]
    assert cli_main([*args, "--shard", "1/2", "--buffer-lines", "2"]) == 2
    assert calls == [] and not out.exists() and not list(tmp_path.glob("out.txt*"))
    with pytest.raises(SystemExit) as exc:  # argparse: K must be < N
        cli_main([*args, "--shard", "2/2"])
    assert exc.value.code == 2
