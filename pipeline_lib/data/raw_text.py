"""Raw text in: the data stage's source side applied to new sentences, as it was to the test set.

A checkpoint records its binarized directory (``work/data/<ds>/bin``); its ``meta.json`` names the
subword kind and model (``subword/codes`` or the SentencePiece model). The Moses treatment the test
source got is recorded by ``preprocess`` in the sibling ``tok-test/meta.json`` (``tokenization.test``:
normalization, non-printing removal, ``-a``, escaping, apostrophes, lowercasing); a hand-made layout
passes that file itself. :class:`TextRecipe` holds all of it, as JSON (``text.json`` in an export),
and :class:`SourcePreparer` applies it: raw line -> Moses line -> subword line. The way back (subword
merging, Moses detokenization) is ``data/detok.py``'s.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.data import moses, subword
from pipeline_lib.data.integrity import load_meta
from pipeline_lib.errors import ConfigError

TEXT_RECIPE_FORMAT = "deepnmt-text/1"


@dataclass(frozen=True)
class TextRecipe:
    """What turns a raw source line into the model's input, and its output back into text."""

    src_lang: str
    tgt_lang: str
    tokenization: moses.TokConfig  # the test source's Moses treatment (tokenize=False: none)
    moses_tokenized: bool  # the target side was Moses-tokenized: detokenize the output
    subword: str  # bpe | spm | none
    subword_model: Path | None  # codes or the SentencePiece model

    def to_json(self, model_name: str | None = None) -> dict[str, Any]:
        """``model_name``: the subword model's file name where the JSON travels (an export)."""
        model = model_name if model_name is not None else self.subword_model
        return {
            "format": TEXT_RECIPE_FORMAT,
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
            "tokenization": dataclasses.asdict(self.tokenization),
            "moses_tokenized": self.moses_tokenized,
            "subword": self.subword,
            "subword_model": None if model is None else str(model),
        }


def test_tokenization(tok_meta: dict[str, Any], path: Path) -> moses.TokConfig:
    """The Moses settings ``preprocess`` recorded for the test split."""
    try:
        return moses.TokConfig(**tok_meta["tokenization"]["test"])
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: no tokenization.test record ({exc}); rerun preprocess_test") from None


def text_recipe(bin_dir: Path, tok_meta_path: Path | None = None) -> TextRecipe:
    """The recipe of the data a checkpoint was trained on. ``tok_meta_path`` defaults to the workflow's
    ``<dataset>/tok-test/meta.json`` beside ``<dataset>/bin``."""
    meta = load_meta(bin_dir)
    path = tok_meta_path if tok_meta_path is not None else bin_dir.parent / "tok-test" / "meta.json"
    if not path.is_file():
        raise ConfigError(
            f"{path}: not found; the test split's preprocess record says how to tokenize raw text "
            "(pass it with --text-meta)"
        )
    tokenization = test_tokenization(json.loads(path.read_text(encoding="utf-8")), path)
    kind = meta.get("subword", "none")
    model = None
    if kind != "none":
        recorded = meta.get("subword_model")
        model = bin_dir / recorded if recorded else None
        if model is None or not model.is_file():
            raise ConfigError(f"{bin_dir / 'meta.json'}: its subword model {recorded!r} is not in {bin_dir}")
    if int(meta.get("vocab_threshold") or 0) > 0:
        raise ConfigError(
            f"{bin_dir / 'meta.json'}: BPE applied with a vocabulary threshold; raw text input does not "
            "reproduce that filter"
        )
    return TextRecipe(
        src_lang=meta["src_lang"],
        tgt_lang=meta["tgt_lang"],
        tokenization=tokenization,
        moses_tokenized=bool(meta.get("moses_tokenized", False)),
        subword=kind,
        subword_model=model,
    )


class SourcePreparer:
    """Raw source lines -> subword lines, as the workflow prepared the test source."""

    def __init__(self, recipe: TextRecipe) -> None:
        self.recipe = recipe
        self.moses = moses.LinePreprocessor(recipe.src_lang, recipe.tokenization)
        if recipe.subword != "none":
            assert recipe.subword_model is not None
            subword.init_segmenter(recipe.subword, str(recipe.subword_model), None, 0)
            self.segment = subword.current_segmenter()
        else:
            self.segment = lambda line: line

    def __call__(self, lines: list[str]) -> list[str]:
        return [self.segment(self.moses(line)) for line in lines]
