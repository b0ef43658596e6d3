"""`export --format ctranslate2`: CTranslate2's beam search, on the exported weights, gives the same
hypotheses and scores as our `translate` (post-LN, pre-LN, Admin and DeepNorm folded into post-LN);
`export` refuses what a standard Transformer cannot express; the fairseq layout without fairseq."""

from __future__ import annotations

import pytest
import torch
from export_fixtures import MAX_LEN_B, TOKENS, save_toy_checkpoint, token_lines, toy_sources, train_toy_model

from pipeline_lib.cli import main as cli_main
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.export.ctranslate2 import ct2_search_options
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

ctranslate2 = pytest.importorskip("ctranslate2")

RESIDUALS = ["post_ln", "pre_ln", "admin", "deepnorm"]
UPDATES = 90  # enough for every hypothesis to end with </s> before the length limit


@pytest.fixture(scope="module", params=RESIDUALS)
def exported(request, tmp_path_factory):
    torch.set_num_threads(2)
    model = train_toy_model(request.param, updates=UPDATES)
    root = tmp_path_factory.mktemp(request.param)
    checkpoint = save_toy_checkpoint(model, root)
    out = root / "ct2"
    rc = cli_main(["export", "--checkpoint", str(checkpoint), "--format", "ctranslate2", "--out", str(out)])
    assert rc == 0
    return model, out


@pytest.mark.parametrize("lenpen", [1.0, 0.6])
def test_ctranslate2_beam_search_gives_our_hypotheses(exported, lenpen):
    model, out = exported
    if model.config.residual in ("admin", "deepnorm"):  # the fold must have something to fold
        scales = torch.cat([c.shortcut_scale().reshape(-1) for c in model.encoder.connections()])
        assert not torch.allclose(scales, torch.ones_like(scales))
    sources = toy_sources(100)
    # min_len 0: CTranslate2 masks </s> before its softmax, we after it (ct2_search_options)
    cfg = SearchConfig(beam=4, nbest=4, lenpen=lenpen, min_len=0, max_len_b=MAX_LEN_B)
    ours = translate(model, sources, cfg, progress=False)
    # Precondition: no hypothesis reached the limit, where the two searches end differently
    assert all(len(h.tokens) < MAX_LEN_B for nbest in ours for h in nbest)
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="float32", intra_threads=2)
    theirs = translator.translate_batch(token_lines(sources), **ct2_search_options(cfg, MAX_LEN_B))
    vocab = Vocabulary(TOKENS)
    same = 0
    for nbest, result in zip(ours, theirs, strict=True):
        hyp = [vocab.token(i) for i in nbest[0].tokens] + ["</s>"]
        if result.hypotheses[0] == hyp:
            same += 1
            assert result.scores[0] == pytest.approx(nbest[0].score, abs=1e-4)
    assert same == len(sources)


def test_int8_model_still_translates(exported):
    _, out = exported
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="int8")
    result = translator.translate_batch(token_lines(toy_sources(3)), beam_size=2)
    assert all(r.hypotheses[0] for r in result)


@pytest.mark.parametrize(
    ("residual", "reason"),
    [
        ("dlcl", "weighted sum of all earlier layers"),
        ("rezero", "no LayerNorm"),
        ("resi_dual", "second, un-normalised residual stream"),
        ("sub_ln", "LayerNorm inside every attention and FFN branch"),
    ],
)
@pytest.mark.parametrize("fmt", ["fairseq", "ctranslate2"])
def test_unexpressible_variants_are_refused_in_one_line(residual, reason, fmt, tmp_path, capsys):
    config = ModelConfig(
        src_vocab_size=4 + len(TOKENS), tgt_vocab_size=4 + len(TOKENS), encoder_layers=2,
        decoder_layers=2, d_model=16, ffn_dim=32, heads=2, residual=residual,
    )  # fmt: skip
    checkpoint = save_toy_checkpoint(build_model(config).eval(), tmp_path)
    out = tmp_path / "out"
    rc = cli_main(["export", "--checkpoint", str(checkpoint), "--format", fmt, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith(f"error: residual={residual} cannot be exported") and reason in err[-1]
    assert not out.exists()


def test_fairseq_files_without_fairseq(tmp_path):
    """What fairseq reads, checked without it (the forward pass is checked against fairseq itself in
    export/test_fairseq_peer.py): dictionaries, BPE codes, parameter names and id order."""
    model = train_toy_model("post_ln", updates=2)
    checkpoint = save_toy_checkpoint(model, tmp_path)
    out = tmp_path / "fs"
    assert (
        cli_main(["export", "--checkpoint", str(checkpoint), "--format", "fairseq", "--out", str(out)]) == 0
    )
    vocab_text = (tmp_path / "bin" / "vocab.txt").read_text(encoding="utf-8")
    assert (out / "dict.xx.txt").read_text(encoding="utf-8") == vocab_text
    assert (out / "dict.yy.txt").read_text(encoding="utf-8") == vocab_text
    assert (out / "bpe.codes").read_text(encoding="utf-8") == (tmp_path / "bin/subword/codes").read_text()
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    weights = state["model"]
    table = model.encoder.embed.table.weight.detach()
    enc = weights["encoder.embed_tokens.weight"]
    # fairseq's ids: <s> 0, <pad> 1, </s> 2, <unk> 3, then ours
    assert torch.equal(enc[0], table[1]) and torch.equal(enc[1], table[0]) and torch.equal(enc[4:], table[4:])
    assert torch.equal(weights["decoder.embed_tokens.weight"][2], table[1])  # its start token is </s>
    qkv = model.encoder.layers[0].self_attn.qkv_proj.weight.detach()
    d = model.config.d_model
    for i, name in enumerate(("q", "k", "v")):
        assert torch.equal(
            weights[f"encoder.layers.0.self_attn.{name}_proj.weight"], qkv[i * d : (i + 1) * d]
        )
    assert state["args"].arch == "transformer" and not state["args"].encoder_normalize_before
