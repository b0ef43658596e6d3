"""`translate` without --target-lang detokenizes in the checkpoint's target language: French output
of an En->Fr checkpoint keeps French spacing ("l'homme", "il ?"), and a Fr->En checkpoint trained on
the same binarized directory (whose meta.json says en->fr) detokenizes as English."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pipeline_lib.checkpoint import save_checkpoint
from pipeline_lib.cli import main
from pipeline_lib.data.detok import moses_detokenize
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.cli import target_language
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import build_model

# Every token detokenizes differently in English and French (elision, space before ? and :).
TOKENS = ["l'", "qu'", "d'", "homme", "il", "?", ":"]


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("target_lang") / "bin"
    root.mkdir()
    Vocabulary(TOKENS).save(root / "vocab.txt")
    meta = {"src_lang": "en", "tgt_lang": "fr", "subword": "bpe", "moses_tokenized": True}
    (root / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def write_checkpoint(path: Path, bin_dir: Path, src: str, tgt: str) -> Path:
    torch.manual_seed(0)
    vocab = Vocabulary.load(bin_dir / "vocab.txt")
    config = ModelConfig(
        src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), encoder_layers=1, decoder_layers=1,
        d_model=16, ffn_dim=32, heads=2,
    )  # fmt: skip
    state = {
        "model_config": config.to_dict(),
        "model": build_model(config).state_dict(),
        "vocab_sha256": vocab.sha256(),
        "data": {"bin_dir": str(bin_dir), "src_lang": src, "tgt_lang": tgt},
        "num_updates": 1,
        "epoch": 1,
        "status": "ok",
    }
    save_checkpoint(state, path)
    return path


def translate(checkpoint: Path, tmp_path: Path, *extra: str) -> tuple[list[str], list[str]]:
    inp = tmp_path / "in.txt"
    inp.write_text("homme il\nl' homme ?\nqu' il :\n", encoding="utf-8")
    out, sub = tmp_path / "out.txt", tmp_path / "out.sub"
    args = ["translate", "--checkpoint", str(checkpoint), "--input", str(inp), "--output", str(out)]
    args += ["--output-subword", str(sub), "--beam", "2", "--min-len", "6", "--max-len-b", "8"]
    assert main([*args, "--device", "cpu", "--no-progress", *extra]) == 0
    return sub.read_text(encoding="utf-8").splitlines(), out.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("src", "tgt"), [("en", "fr"), ("fr", "en")])
def test_detokenizes_in_the_checkpoints_target_language(
    bin_dir: Path, tmp_path: Path, src: str, tgt: str
) -> None:
    ckpt = write_checkpoint(tmp_path / "ckpt.pt", bin_dir, src, tgt)
    subword, text = translate(ckpt, tmp_path)
    assert text == moses_detokenize(subword, tgt)
    assert moses_detokenize(subword, "en") != moses_detokenize(subword, "fr")  # the language shows


def test_target_lang_flag_overrides_the_checkpoint(bin_dir: Path, tmp_path: Path) -> None:
    ckpt = write_checkpoint(tmp_path / "ckpt.pt", bin_dir, "en", "fr")
    subword, text = translate(ckpt, tmp_path, "--target-lang", "en")
    assert text == moses_detokenize(subword, "en")


def test_target_language_precedence() -> None:
    reverse = {"src_lang": "fr", "tgt_lang": "en"}
    data_meta = {"src_lang": "en", "tgt_lang": "fr"}
    assert target_language(None, reverse, data_meta) == "en"
    assert target_language("de", reverse, data_meta) == "de"
    assert target_language(None, {}, data_meta) == "fr"  # an old checkpoint without the record
    assert target_language(None, {}, {}) is None
