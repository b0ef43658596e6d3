"""Column letters for the systems of a pairwise significance matrix (a..z, then aa, ab, ...)."""

from __future__ import annotations

import string


def system_letters(n: int) -> list[str]:
    alphabet = string.ascii_lowercase
    return [alphabet[i // 26 - 1] + alphabet[i % 26] if i >= 26 else alphabet[i] for i in range(n)]
