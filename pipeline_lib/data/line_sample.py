"""A seeded sample of a parallel corpus's lines, streamed, for learning BPE on a bounded share of it.

Each line pair is kept with probability ``size / lines``, from a generator seeded by ``seed``, so the
sample is about ``size`` lines (not exactly: a Bernoulli draw per line needs no index table, whatever
the corpus size), the same pairs in both languages, and the same sample on every rerun.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from pipeline_lib.data.textio import count_lines, read_lines
from pipeline_lib.errors import InputError

_BLOCK = 65_536  # draws made at a time


def kept_lines(total: int, size: int, seed: int) -> Iterator[bool]:
    """Whether each of ``total`` lines is in the sample."""
    rng = np.random.default_rng(seed)
    p = min(1.0, size / max(total, 1))
    for start in range(0, total, _BLOCK):
        yield from (rng.random(min(_BLOCK, total - start)) < p).tolist()


def write_sample(sources: list[Path], targets: list[Path], size: int, seed: int) -> tuple[int, int]:
    """Write the sampled lines of each of ``sources`` (line-aligned files) to the matching ``targets``;
    returns (kept, total) lines."""
    total = count_lines(sources[0])
    kept = 0
    outs = [open(t, "w", encoding="utf-8", newline="\n") for t in targets]  # noqa: SIM115
    try:
        readers = [read_lines(s) for s in sources]
        for keep, *lines in zip(kept_lines(total, size, seed), *readers, strict=True):
            if keep:
                kept += 1
                for out, line in zip(outs, lines, strict=True):
                    out.write(line)
                    out.write("\n")
    except ValueError:  # zip(strict=True): a file ended before the others
        counts = ", ".join(f"{s}: {count_lines(s)}" for s in sources)
        raise InputError(f"the training sides differ in line count ({counts})") from None
    finally:
        for out in outs:
            out.close()
    return kept, total
