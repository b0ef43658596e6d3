"""Undo the data stage on decoder output: subword merging, then Moses detokenization.

The decoder reads the bpe directory's ``meta.json`` (see ``data/apply_subword.py``): ``subword``
(``"bpe"``, ``"spm"`` or ``"none"``) tells :func:`postprocess_subwords` what to undo, and
``moses_tokenized`` whether :func:`moses_detokenize` must run before sacreBLEU.
"""

from __future__ import annotations

from collections.abc import Iterable

from sacremoses import MosesDetokenizer

BPE_SEPARATOR = "@@"
SPM_SPACE = "\u2581"  # SentencePiece's word-boundary marker


def postprocess_subwords(line: str, kind: str) -> str:
    """Join subwords back into words.

    ``bpe``: subword-nmt's ``@@ `` continuation marker (also a stray final ``@@``), as
    fairseq's ``--remove-bpe``; ``spm``: drop spaces and turn ``▁`` into spaces;
    ``none``: unchanged.
    """
    if kind == "bpe":
        return (line + " ").replace(BPE_SEPARATOR + " ", "").rstrip()
    if kind == "spm":
        return line.replace(" ", "").replace(SPM_SPACE, " ").strip()
    if kind == "none":
        return line
    raise ValueError(f"unknown subword kind {kind!r} (expected bpe, spm or none)")


_DETOKENIZERS: dict[str, MosesDetokenizer] = {}


def moses_detokenize(lines: Iterable[str], lang: str) -> list[str]:
    """Moses-detokenize (and unescape ``&amp;`` etc., and re-join ``@-@`` hyphens) each line."""
    detok = _DETOKENIZERS.get(lang)
    if detok is None:
        detok = _DETOKENIZERS[lang] = MosesDetokenizer(lang=lang)
    return [detok.detokenize(line.split(), unescape=True) for line in lines]


def restore_text(lines: Iterable[str], subword: str, moses_tokenized: bool, lang: str) -> list[str]:
    """Subword text -> plain detokenized text (what sacreBLEU should score)."""
    words = [postprocess_subwords(line, subword) for line in lines]
    return moses_detokenize(words, lang) if moses_tokenized else words
