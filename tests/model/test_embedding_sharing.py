"""Separate encoder and decoder embedding tables (recipe `share_all_embeddings: false`): Xu et al.'s
Neutron ties only the decoder's input table to its output projection (hfxunlp/transformer @635c75c
cnfg/base.py:48-49 bindDecoderEmb True, share_emb False; transformer/NMT.py:39,41; Decoder.py:147-161).

The model built that way, its initialisation (fairseq's, per table), training, checkpoints, averaging
and decoding through the real commands, the fairseq and CTranslate2 exports, and the DLCL config's
dry run, which passes the switch to the Xu rows' train jobs only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from export_fixtures import MAX_LEN_B, TOKENS, save_toy_checkpoint, token_lines, toy_sources, train_toy_model
from train_fixtures import make_bin_dir, train_args

from pipeline_lib.checkpoint import load_checkpoint, load_model
from pipeline_lib.cli import main
from pipeline_lib.data.indexed import ParallelCorpus
from pipeline_lib.decode.search import BOS, EOS, SearchConfig
from pipeline_lib.decode.translator import translate
from pipeline_lib.export.fairseq import FAIRSEQ_EOS, fairseq_ids
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel, build_model

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DLCL_CONFIG = "config.wmt14_en_de_dlcl_lipschitz.yaml"


def small(shared: bool, vocab: int = 50, d: int = 16, ffn: int = 32, **fields) -> TransformerModel:
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, encoder_layers=2, decoder_layers=2,
                         d_model=d, ffn_dim=ffn, heads=2, share_all_embeddings=shared, **fields)  # fmt: skip
    return build_model(config)


def tables(model: TransformerModel) -> tuple[torch.Tensor, torch.Tensor]:
    return model.encoder.embed.table.weight, model.decoder.embed.table.weight


def assert_decoder_tied_only(model: TransformerModel) -> None:
    enc, dec = tables(model)
    assert enc is not dec and enc.data_ptr() != dec.data_ptr()
    assert not torch.equal(enc, dec)
    # the output projection IS the decoder's input table: one parameter, one storage
    assert model.output_projection.weight is dec
    assert model.output_projection.weight.data_ptr() == dec.data_ptr()


def test_unshared_model_ties_only_the_decoder_table_to_the_output_projection():
    assert_decoder_tied_only(small(shared=False))
    shared = small(shared=True)
    enc, dec = tables(shared)
    assert enc is dec and shared.output_projection.weight is enc


def test_unshared_model_has_exactly_one_more_vocab_by_d_table():
    vocab, d, ffn, layers = 50, 16, 32, 2
    attention = 4 * (d * d + d)  # q, k, v and out projections, with biases
    norm, ffn_params = 2 * d, 2 * d * ffn + ffn + d
    encoder_layer = attention + ffn_params + 2 * norm
    decoder_layer = 2 * attention + ffn_params + 3 * norm
    shared_count = vocab * d + layers * (encoder_layer + decoder_layer)  # post-LN: no final norms
    assert small(shared=True).num_parameters() == shared_count
    assert small(shared=False).num_parameters() == shared_count + vocab * d


def test_separate_tables_are_each_drawn_as_fairseqs_embedding():
    """fairseq's Embedding: N(0, d^-0.5), padding row zero (facebookresearch/fairseq @3d262bb2
    fairseq/models/transformer/transformer_base.py:189-193), one per side when not shared (:106-109)."""
    vocab, d = 400, 64
    model = small(shared=False, vocab=vocab, d=d, ffn=64)
    for table in tables(model):
        assert torch.count_nonzero(table[model.config.pad_idx]) == 0
        rows = torch.cat([table[: model.config.pad_idx], table[model.config.pad_idx + 1 :]])
        assert rows.mean().abs() < 0.005  # the mean's standard error is 0.125 / 160 = 0.0008
        assert rows.std().item() == pytest.approx(d**-0.5, rel=0.03)  # std's relative error ~0.4%
    enc, dec = tables(model)
    assert torch.corrcoef(torch.stack([enc.flatten(), dec.flatten()]))[0, 1].abs() < 0.05  # two draws


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """Two epochs of the real `train` command with separate tables."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("unshared")
    bin_dir = make_bin_dir(root)
    save = root / "run"
    assert main(train_args(bin_dir, save, "--max-epoch", "2", "--no-share-all-embeddings")) == 0
    return save


def test_training_updates_both_tables_and_checkpoints_round_trip(trained: Path):
    first, last = (load_checkpoint(trained / f"checkpoint{e}.pt")["model"] for e in (1, 2))
    for key in ("encoder.embed.table.weight", "decoder.embed.table.weight"):
        assert not torch.equal(first[key], last[key]), f"{key} was not trained"
    assert torch.equal(last["output_projection.weight"], last["decoder.embed.table.weight"])
    model, _ = load_model(trained / "checkpoint2.pt")
    assert model.config.share_all_embeddings is False and model.config.share_decoder_input_output_embed
    assert_decoder_tied_only(model)
    state = model.state_dict()
    assert state.keys() == last.keys()
    assert all(torch.equal(state[k], last[k]) for k in last)


def test_average_keeps_the_tables_apart(trained: Path, tmp_path: Path):
    out = tmp_path / "avg.pt"
    args = ["average", "--save-dir", str(trained), "--num-epoch-checkpoints", "2", "--output", str(out)]
    assert main(args) == 0
    first, last = (load_checkpoint(trained / f"checkpoint{e}.pt")["model"] for e in (1, 2))
    model, _ = load_model(out)
    assert_decoder_tied_only(model)
    for key, table in zip(("encoder", "decoder"), tables(model), strict=True):
        mean = (first[f"{key}.embed.table.weight"] + last[f"{key}.embed.table.weight"]) / 2
        assert torch.allclose(table, mean, atol=1e-6)


def test_incremental_decoding_scores_are_the_full_forwards(trained: Path):
    """Greedy search's per-token log-probs (cached, incremental) equal a teacher-forced forward pass."""
    model, meta = load_model(trained / "checkpoint2.pt")
    corpus = ParallelCorpus(Path(meta["data"]["bin_dir"]), "valid", "xx", "yy")
    sources = [corpus.src[i].tolist() for i in range(4)]
    hyps = translate(
        model, sources, SearchConfig(beam=1, lenpen=0.0, min_len=0, max_len_b=12), progress=False
    )
    for src, (hyp,) in zip(sources, hyps, strict=True):
        prev = torch.tensor([[BOS, *hyp.tokens]])
        target = torch.tensor([*hyp.tokens, EOS])
        with torch.no_grad():
            logp = F.log_softmax(model(torch.tensor([[*src, EOS]]), prev)[0].float(), -1)
        want = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        assert torch.allclose(torch.tensor(hyp.positional_scores), want, atol=1e-5)


@pytest.fixture(scope="module")
def toy_unshared(tmp_path_factory) -> tuple[TransformerModel, Path]:
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and the suite shares the cores
    model = train_toy_model("post_ln", updates=90, share_all_embeddings=False)
    root = tmp_path_factory.mktemp("export")
    return model, save_toy_checkpoint(model, root)


def test_fairseq_export_writes_each_sides_table(toy_unshared, tmp_path: Path):
    """The export stores every table untied anyway (fairseq.py's docstring: the decoder's input table
    carries our <s> in fairseq's </s> row), so an unshared model needs only the right table per side."""
    model, checkpoint = toy_unshared
    out = tmp_path / "fs"
    assert main(["export", "--checkpoint", str(checkpoint), "--format", "fairseq", "--out", str(out)]) == 0
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    weights, args = state["model"], state["args"]
    assert not args.share_all_embeddings and not args.share_decoder_input_output_embed
    perm = fairseq_ids(model.config.tgt_vocab_size)
    enc, dec = (t.detach() for t in tables(model))
    assert torch.equal(weights["encoder.embed_tokens.weight"], enc[perm])
    want_dec = dec[perm].clone()
    want_dec[FAIRSEQ_EOS] = dec[BOS]
    assert torch.equal(weights["decoder.embed_tokens.weight"], want_dec)
    assert torch.equal(weights["decoder.output_projection.weight"], dec[perm])


def test_ctranslate2_export_of_an_unshared_model_gives_our_hypotheses(toy_unshared, tmp_path: Path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from pipeline_lib.export.ctranslate2 import ct2_search_options

    model, checkpoint = toy_unshared
    out = tmp_path / "ct2"
    assert (
        main(["export", "--checkpoint", str(checkpoint), "--format", "ctranslate2", "--out", str(out)]) == 0
    )
    sources = toy_sources(60)
    cfg = SearchConfig(beam=4, lenpen=1.0, min_len=0, max_len_b=MAX_LEN_B)
    ours = translate(model, sources, cfg, progress=False)
    assert all(len(h.tokens) < MAX_LEN_B for nbest in ours for h in nbest)  # no length-limit endings
    translator = ctranslate2.Translator(str(out), device="cpu", compute_type="float32", intra_threads=1)
    theirs = translator.translate_batch(token_lines(sources), **ct2_search_options(cfg, MAX_LEN_B))
    token = dict(enumerate(["<pad>", "<s>", "</s>", "<unk>", *TOKENS]))
    for nbest, result in zip(ours, theirs, strict=True):
        assert result.hypotheses[0] == [token[i] for i in nbest[0].tokens] + ["</s>"]
        assert result.scores[0] == pytest.approx(nbest[0].score, abs=1e-4)


def test_dlcl_config_dry_run_unshares_the_xu_rows_only():
    """docs/paper-scale.md's command as typed: `--no-share-all-embeddings` on every xu_* train job,
    on no other."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        ["snakemake", "all", "-n", "-p", "--configfile", DLCL_CONFIG],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    unshared: dict[str, bool] = {}
    for block in re.findall(r"^rule train:\n(.*?)(?:\n\n|\Z)", proc.stdout, re.S | re.M):
        exp = re.search(r"wildcards: exp=(\S+)", block).group(1)
        shell = re.search(r"^Shell command: (.*)$", block, re.M).group(1)
        assert " -m pipeline_lib train " in shell, shell
        unshared[exp] = " --no-share-all-embeddings " in shell
    assert any(name.startswith("xu_") for name in unshared) and any(
        not name.startswith("xu_") for name in unshared
    ), sorted(unshared)
    assert unshared == {name: name.startswith("xu_") for name in unshared}
