"""Tiny trained checkpoints for the export tests: a copy-with-shift task, a few dozen updates, so that
the models end their hypotheses (with </s>) before the length limit without being trivial."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from train_fixtures import save_decoding_checkpoint

from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.model.admin import apply_profile, closed_form_profile
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel, build_model

TOKENS = [f"t{i}@@" if i % 3 == 0 else f"t{i}" for i in range(24)]
V = 4 + len(TOKENS)
MAX_LEN_B = 24  # the tests' length limit: sources have at most 10 tokens


def toy_batch(gen: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src, prev, tgt): the target is the source with every id shifted by one (wrapping)."""
    lens = torch.randint(2, 11, (n,), generator=gen)
    width = int(lens.max()) + 1
    src, prev, tgt = (torch.zeros(n, width, dtype=torch.long) for _ in range(3))
    for i, length in enumerate(lens.tolist()):
        seq = torch.randint(4, V, (length,), generator=gen)
        out = (seq - 4 + 1) % (V - 4) + 4
        src[i, :length], src[i, length] = seq, 2
        prev[i, 0], prev[i, 1 : length + 1] = 1, out
        tgt[i, :length], tgt[i, length] = out, 2
    return src, prev, tgt


def toy_sources(n: int, seed: int = 123) -> list[list[int]]:
    src, _, _ = toy_batch(torch.Generator().manual_seed(seed), n)
    return [row[row.gt(2)].tolist() for row in src]


def train_toy_model(residual: str, updates: int = 60, seed: int = 0, **overrides) -> TransformerModel:
    torch.manual_seed(seed)
    config = ModelConfig(
        src_vocab_size=V, tgt_vocab_size=V, encoder_layers=2, decoder_layers=2, d_model=32,
        ffn_dim=64, heads=4, dropout=0.1, residual=residual, **overrides,
    )  # fmt: skip
    model = build_model(config).train()
    if residual == "admin":
        apply_profile(model, closed_form_profile(config))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(updates):
        src, prev, tgt = toy_batch(gen, 48)
        loss = F.cross_entropy(model(src, prev).view(-1, V), tgt.view(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def save_toy_checkpoint(model: TransformerModel, root: Path, with_codes: bool = True) -> Path:
    """checkpoint_last.pt under ``root``, with the binarized directory it records (vocab, meta, codes)."""
    bin_dir = root / "bin"
    (bin_dir / "subword").mkdir(parents=True, exist_ok=True)
    vocab = Vocabulary(TOKENS, list(range(1000, 1000 - len(TOKENS), -1)))
    vocab.save(bin_dir / "vocab.txt")
    meta = {"src_lang": "xx", "tgt_lang": "yy", "subword": "bpe", "moses_tokenized": False}
    if with_codes:
        (bin_dir / "subword" / "codes").write_text("#version: 0.2\nt 1\n", encoding="utf-8")
        meta["subword_model"] = "subword/codes"
    (bin_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    path = save_decoding_checkpoint(model, vocab, bin_dir, ("xx", "yy"), 60, root)
    return path


def token_lines(sources: list[list[int]]) -> list[list[str]]:
    vocab = Vocabulary(TOKENS)
    return [[vocab.token(i) for i in ids] for ids in sources]
