"""Translate raw text with this CTranslate2 export (copied into the export as ``translate.py``).

    pip install ctranslate2 sacremoses subword-nmt sentencepiece
    python translate.py < source.txt > hypotheses.txt        # --beam, --device, --batch-size: --help

It applies what ``text.json`` records of the training data: the Moses normalization and tokenization
the test source got, BPE (subword-nmt) or SentencePiece, then beam search with the length limit
a*len+b of the workflow's decoding, and undoes subwords and Moses tokenization on the output. The
steps are those of ``python -m pipeline_lib translate --raw-input`` (pipeline_lib/data/raw_text.py,
pipeline_lib/data/detok.py); this file imports nothing from pipeline_lib, so it travels alone.
At the length limit the workflow forces ``</s>``, which CTranslate2 cannot: :func:`best_hypotheses`
rescores its beam with ``</s>`` appended instead, so the 1-best is the workflow's there too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent


def moses_tokenizer(recipe: dict) -> Callable[[str], str]:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    cfg, lang = recipe["tokenization"], recipe["src_lang"]
    norm = MosesPunctNormalizer(lang=lang, post_remove_control_chars=cfg["remove_non_printing"])
    tok = MosesTokenizer(lang=lang)

    def run(line: str) -> str:
        if cfg["straighten_apostrophes"]:
            line = line.replace("\u2019", "'")
        if cfg["normalize"]:
            line = norm.normalize(line)
        elif cfg["remove_non_printing"]:
            line = norm.remove_control_chars(line)
        if cfg["tokenize"]:
            line = tok.tokenize(
                line,
                aggressive_dash_splits=cfg["aggressive_dash_splits"],
                escape=cfg["escape"],
                return_str=True,
            )
        else:
            line = " ".join(line.split())
        return line.lower() if cfg["lowercase"] else line

    return run


def segmenter(recipe: dict) -> Callable[[str], list[str]]:
    kind = recipe["subword"]
    if kind == "none":
        return str.split
    model = str(HERE / recipe["subword_model"])
    if kind == "bpe":
        import codecs

        from subword_nmt.apply_bpe import BPE

        with codecs.open(model, encoding="utf-8") as codes:
            bpe = BPE(codes)
        return lambda line: bpe.segment_tokens(line.split())
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=model)
    return lambda line: sp.encode(line, out_type=str)


def detokenizer(recipe: dict) -> Callable[[list[str]], str]:
    from sacremoses import MosesDetokenizer

    kind, detok = recipe["subword"], MosesDetokenizer(lang=recipe["tgt_lang"])

    def run(tokens: list[str]) -> str:
        line = " ".join(tokens)
        if kind == "bpe":
            line = (line + " ").replace("@@ ", "").rstrip()
        elif kind == "spm":
            line = line.replace(" ", "").replace("\u2581", " ").strip()
        return detok.detokenize(line.split(), unescape=True) if recipe["moses_tokenized"] else line

    return run


def translate(lines: list[str], args: argparse.Namespace, recipe: dict) -> list[str]:
    import ctranslate2

    decoding = recipe["decoding"]
    beam = args.beam or decoding["beam"]
    tokenize, segment, restore = moses_tokenizer(recipe), segmenter(recipe), detokenizer(recipe)
    sources = [segment(tokenize(line)) for line in lines]
    # a*src_len+b with src_len counting the source </s>, capped by the model's positions (as ours)
    limits = [
        min(
            math.floor(decoding["max_len_a"] * (len(s) + 1) + decoding["max_len_b"]),
            recipe["max_positions"] - 1,
        )
        for s in sources
    ]
    translator = ctranslate2.Translator(str(HERE), device=args.device)
    out = [""] * len(sources)
    # CTranslate2 takes one length limit per batch: batch sentences of equal limits
    order = sorted(range(len(sources)), key=lambda i: limits[i])
    for start in range(0, len(order), args.batch_size):
        ids = order[start : start + args.batch_size]
        for limit in sorted({limits[i] for i in ids}):
            group = [i for i in ids if limits[i] == limit]
            best = best_hypotheses(translator, [sources[i] for i in group], limit, beam, decoding)
            for i, tokens in zip(group, best, strict=True):
                out[i] = restore(tokens)
    return out


def best_hypotheses(
    translator, sources: list[list[str]], limit: int, beam: int, decoding: dict
) -> list[list[str]]:
    """The workflow's 1-best (without ``</s>``) for sources sharing one length ``limit``.

    The workflow's search forces ``</s>`` after ``limit`` tokens; CTranslate2 has no such rule, so
    the search runs ``limit`` steps, returning the beam (finished and unfinished), and each
    hypothesis is then scored with ``</s>`` appended (``score_batch`` appends it): the sum of
    log-probs over length**lenpen, ``</s>`` counted, as the workflow ranks them.
    """
    results = translator.translate_batch(
        sources,
        beam_size=beam,
        num_hypotheses=beam,
        length_penalty=decoding["lenpen"],
        max_decoding_length=limit,
        min_decoding_length=decoding["min_len"],
        return_end_token=True,
        max_input_length=0,
    )
    flat_src, flat_hyp, owner = [], [], []
    for n, result in enumerate(results):
        for tokens in result.hypotheses:
            flat_src.append(sources[n])
            flat_hyp.append(tokens[:-1] if tokens and tokens[-1] == "</s>" else tokens)
            owner.append(n)
    scored = translator.score_batch(flat_src, flat_hyp, max_input_length=0)
    best: list[tuple[float, list[str]] | None] = [None] * len(sources)
    for n, hyp, score in zip(owner, flat_hyp, scored, strict=True):
        value = sum(score.log_probs) / len(score.log_probs) ** decoding["lenpen"]
        if best[n] is None or value > best[n][0]:
            best[n] = (value, hyp)
    return [b[1] if b is not None else [] for b in best]


def main(argv: list[str] | None = None) -> int:
    recipe = json.loads((HERE / "text.json").read_text(encoding="utf-8"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", default="-", help="raw text, one sentence per line (default: stdin)")
    p.add_argument("--beam", type=int, default=0, help=f"beam size (default: {recipe['decoding']['beam']})")
    p.add_argument("--device", default="cpu", help="cpu | cuda")
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    if args.input == "-":
        lines = sys.stdin.read().splitlines()
    else:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    for line in translate(lines, args, recipe):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
