"""Subword segmentation of text files (subword-nmt BPE or SentencePiece), chunk-parallel and streamed.

``learn-bpe`` writes the model directory's ``subword.json`` (``MODEL_META``); ``apply-bpe`` and the
benchmarks segment files with :func:`segment_file`, one segmenter per worker process.
"""

from __future__ import annotations

import codecs
import itertools
import json
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from pipeline_lib.data.chunk_map import map_line_blocks
from pipeline_lib.data.textio import count_lines
from pipeline_lib.errors import InputError

MODEL_META = "subword.json"
BPE_CACHE_WORDS = 100_000  # the Zipf head of a corpus: most tokens hit it

_SEGMENTER: dict[str, Callable[[str], str]] = {}


def init_segmenter(kind: str, model_path: str, vocab_path: str | None, threshold: int) -> None:
    """Build the segmenter once per worker process."""
    if kind == "bpe":
        from subword_nmt import apply_bpe

        vocab = None
        if vocab_path is not None and threshold > 0:
            with codecs.open(vocab_path, encoding="utf-8") as vf:
                vocab = apply_bpe.read_vocabulary(vf, threshold)
        with codecs.open(model_path, encoding="utf-8") as codes:
            bpe = apply_bpe.BPE(codes, vocab=vocab)

        def segment(line: str) -> str:
            # subword-nmt caches every word it has segmented; bounded, so memory stays flat in corpus size.
            if len(bpe.cache) > BPE_CACHE_WORDS:
                # Keep the older half: a word cached early in a corpus is usually a frequent one.
                for word in list(itertools.islice(reversed(bpe.cache), len(bpe.cache) // 2)):
                    del bpe.cache[word]
            return " ".join(bpe.segment_tokens(line.split()))

        _SEGMENTER["fn"] = segment
    else:
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=model_path)
        _SEGMENTER["fn"] = lambda line: " ".join(sp.encode(line, out_type=str))


def current_segmenter() -> Callable[[str], str]:
    """The segmenter :func:`init_segmenter` built in this process (one line in, one line out)."""
    return _SEGMENTER["fn"]


def segment_chunk(lines: list[str]) -> tuple[bytes, int]:
    """The segmented lines as the output file's bytes, and their count: one buffer per chunk for the
    main process to write."""
    fn = _SEGMENTER["fn"]
    return "".join(fn(line) + "\n" for line in lines).encode("utf-8"), len(lines)


def segment_file(
    src: Path,
    dst: Path,
    *,
    kind: str,
    model_path: Path,
    vocab_path: Path | None = None,
    threshold: int = 0,
    workers: int = 1,
    chunk_size: int = 2000,
) -> int:
    """Segment ``src`` into ``dst`` (written directly; callers handle atomicity)."""
    n = 0
    total = count_lines(src)
    with open(dst, "wb") as out:
        bar = tqdm(total=total, desc=f"{kind} {src.name}", unit="line", disable=None)
        initargs = (kind, str(model_path), str(vocab_path) if vocab_path else None, threshold)
        for data, n_lines in map_line_blocks(
            segment_chunk,
            src,
            workers=workers,
            chunk_size=chunk_size,
            initializer=init_segmenter,
            initargs=initargs,
        ):
            out.write(data)
            n += n_lines
            bar.update(n_lines)
        bar.close()
    return n


def load_model_meta(model_dir: Path) -> dict:
    path = model_dir / MODEL_META
    if not path.is_file():
        raise InputError(f"{path}: not found (run `python -m pipeline_lib learn-bpe` first)")
    return json.loads(path.read_text(encoding="utf-8"))
