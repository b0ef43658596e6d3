"""The token vocabulary shared by the binarizer, the trainer and the decoder.

Ids are fixed: 0 ``<pad>``, 1 ``<s>``, 2 ``</s>``, 3 ``<unk>``, then the ordinary tokens.
``vocab.txt`` holds one ``token count`` line per ordinary token, most frequent first (ties
broken by the token string, so a rebuild from the same counts gives the same file); the
four specials are implicit and never written. By default one joint vocabulary covers
source and target (as fairseq's ``--joined-dictionary``), which is what joint BPE expects.

``sha256()`` is the checksum of the file content (the canonical serialisation), stored in
checkpoints so a decoder refuses a vocabulary that differs from the one trained on.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pipeline_lib.atomic import write_text
from pipeline_lib.errors import InputError

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS: tuple[str, ...] = (PAD, BOS, EOS, UNK)


class Vocabulary:
    """Token <-> id mapping with the four fixed specials first."""

    def __init__(self, tokens: Sequence[str], counts: Sequence[int] | None = None) -> None:
        if counts is not None and len(counts) != len(tokens):
            raise ValueError("tokens and counts differ in length")
        self._itos: list[str] = list(SPECIALS)
        self._counts: list[int] = [0] * len(SPECIALS)
        self._stoi: dict[str, int] = {tok: i for i, tok in enumerate(SPECIALS)}
        for i, tok in enumerate(tokens):
            if tok in self._stoi:
                raise ValueError(f"duplicate or reserved token {tok!r}")
            if not tok or any(ch.isspace() for ch in tok):
                raise ValueError(f"token {tok!r} is empty or contains whitespace")
            self._stoi[tok] = len(self._itos)
            self._itos.append(tok)
            self._counts.append(int(counts[i]) if counts is not None else 0)

    # -- special ids -------------------------------------------------------------------
    @property
    def pad(self) -> int:
        return 0

    @property
    def bos(self) -> int:
        return 1

    @property
    def eos(self) -> int:
        return 2

    @property
    def unk(self) -> int:
        return 3

    @property
    def nspecial(self) -> int:
        return len(SPECIALS)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: str) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self._itos == other._itos

    def __hash__(self) -> int:
        return hash(tuple(self._itos))

    def index(self, token: str) -> int:
        return self._stoi.get(token, 3)

    def token(self, idx: int) -> str:
        return self._itos[idx]

    def count(self, idx: int) -> int:
        return self._counts[idx]

    @property
    def tokens(self) -> list[str]:
        """The ordinary tokens (without specials), in id order."""
        return self._itos[len(SPECIALS) :]

    # -- encoding ----------------------------------------------------------------------
    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Map tokens to ids; unknown tokens become ``unk``. No ``</s>`` is appended."""
        get = self._stoi.get
        return [get(t, 3) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Map ids back to tokens, skipping pad/bos/eos; ``unk`` is kept as ``<unk>``."""
        itos = self._itos
        return [itos[i] for i in (int(x) for x in ids) if i > 2]

    def string(self, ids: Iterable[int]) -> str:
        """Space-joined :meth:`decode` (still subword text: see ``detok.postprocess_subwords``)."""
        return " ".join(self.decode(ids))

    # -- building and files ------------------------------------------------------------
    @classmethod
    def build(
        cls, counter: Counter[str] | dict[str, int], threshold: int = 1, nwords: int = -1
    ) -> Vocabulary:
        """Vocabulary of tokens seen at least ``threshold`` times, at most ``nwords`` of them
        (``-1``: no limit), most frequent first, ties by token."""
        items = [(tok, int(c)) for tok, c in counter.items() if c >= threshold and tok not in SPECIALS]
        items.sort(key=lambda kv: (-kv[1], kv[0]))
        if nwords >= 0:
            items = items[:nwords]
        return cls([t for t, _ in items], [c for _, c in items])

    def to_text(self) -> str:
        counts = self._counts[len(SPECIALS) :]
        return "".join(f"{tok} {c}\n" for tok, c in zip(self.tokens, counts, strict=True))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``vocab.txt`` atomically."""
        write_text(path, self.to_text())

    def sha256(self) -> str:
        """Checksum of the vocab file content (identical to ``sha256sum vocab.txt``)."""
        return hashlib.sha256(self.to_text().encode("utf-8")).hexdigest()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Vocabulary:
        path = Path(path)
        if not path.is_file():
            raise InputError(f"{path}: vocabulary file not found")
        tokens: list[str] = []
        counts: list[int] = []
        with path.open(encoding="utf-8", newline="\n") as f:
            for lineno, line in enumerate(f, 1):
                parts = line.rstrip("\n").split(" ")
                if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                    raise InputError(f"{path}:{lineno}: expected 'token count', got {line.rstrip()!r}")
                tokens.append(parts[0])
                counts.append(int(parts[1]))
        try:
            return cls(tokens, counts)
        except ValueError as exc:
            raise InputError(f"{path}: {exc}") from exc
