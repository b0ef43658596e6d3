"""``translate``: beam search, greedy decoding or sampling with a trained checkpoint.

Usage (flags as in fairseq-generate / fairseq-interactive)::

    # subword text in, detokenized text out (En-De: beam 4, lenpen 0.6)
    python -m pipeline_lib translate --checkpoint run/checkpoint_avg.pt \\
        --input work/de/bpe/test.en --output out/test.de --beam 4 --lenpen 0.6 \\
        --output-generate out/test.generate --output-jsonl out/test.jsonl

    # raw text in (the dataset's Moses settings and BPE/SPM applied, as to its test set), text out,
    # searched as the workflow's translate job of experiment enfr_60L12L_admin searches (beam, lenpen, length
    # limit: its decoding entry in the config; any search flag given here wins)
    python -m pipeline_lib translate --checkpoint run/checkpoint_avg.pt --raw-input news.en \
        --output news.de --decoding enfr_60L12L_admin --configfile config.wmt14_en_fr.yaml

    # a binarized split (adds T- reference lines), greedy on GPU in bf16
    python -m pipeline_lib translate --checkpoint ckpt.pt --split test --beam 1 \\
        --device cuda --bf16 --output out/test.txt

    # back-translation by sampling (top-10, seeded)
    python -m pipeline_lib translate --checkpoint fr-en.pt --input mono.fr.bpe \\
        --sampling --sampling-topk 10 --seed 7 --output-subword bt.en.bpe --output bt.en

The vocabulary, the subword kind (``bpe``/``spm``) and whether the data was Moses-tokenized come
from the binarized directory recorded in the checkpoint (``--data-dir`` overrides it). Outputs are
written in input order, atomically (a failed run leaves earlier outputs untouched); see
``pipeline_lib.decode.outputs`` for the formats.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import torch

from pipeline_lib.cpu.allocator import keep_freed_memory
from pipeline_lib.cpu.gemm_names import CPU_GEMMS
from pipeline_lib.data.textio import count_lines
from pipeline_lib.dataclass_cli import add_dataclass_arguments, dataclass_from_args
from pipeline_lib.decode.decoding_entry import (
    RUNTIME_KEYS,
    SEARCH_KEYS,
    add_decoding_arguments,
    apply_decoding,
)
from pipeline_lib.decode.inputs import (
    Sources,
    encode_lines,
    iter_text_sources,
    parse_shard,
    read_binarized_sources,
    read_raw_lines,
    read_text_sources,
    resolve_data,
    shard_range,
    split_size,
)
from pipeline_lib.decode.outputs import OutputWriter, Postprocess, render
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import check_cpu_gemm, resolve_device, translate
from pipeline_lib.divergence.placeholders import add_skip_argument, is_diverged, skip_diverged
from pipeline_lib.errors import ConfigError
from pipeline_lib.lang_code import lang_code

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    io = p.add_argument_group("input/output")
    io.add_argument("--checkpoint", required=True, help="checkpoint file (e.g. the averaged one)")
    src = io.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", help="subword text, one sentence per line ('-': stdin)")
    src.add_argument("--split", help="a split of the binarized data directory (e.g. test)")
    src.add_argument(
        "--raw-input",
        help="untokenized text, one sentence per line ('-': stdin): normalized, Moses-tokenized and "
        "BPE/SentencePiece-segmented as the training data's test split was (pipeline_lib/data/raw_text.py)",
    )
    io.add_argument(
        "--text-meta",
        default=None,
        help="with --raw-input: the test split's preprocess meta.json (default: tok-test/meta.json "
        "beside the data directory, the workflow's layout)",
    )
    io.add_argument("--data-dir", default=None, help="binarized directory (default: the checkpoint's)")
    io.add_argument(
        "--source-lang", default=None, type=lang_code, help="for --split (default: the checkpoint's)"
    )
    io.add_argument(
        "--target-lang",
        default=None,
        help="language for Moses detokenization (default: the checkpoint's target language)",
    )
    io.add_argument("--output", required=True, help="plain text: subwords removed, detokenized ('-': stdout)")
    io.add_argument("--output-subword", default=None, help="also write the raw subword hypotheses")
    io.add_argument("--output-generate", default=None, help="also write fairseq-generate S/T/H/D/P lines")
    io.add_argument("--output-jsonl", default=None, help="also write one JSON record per sentence")
    io.add_argument(
        "--shard",
        type=parse_shard,
        default=None,
        metavar="K/N",
        help="translate only the K-th (0-based) of N contiguous, near-equal parts of --input: "
        "back-translation runs one job per shard",
    )
    io.add_argument(
        "--buffer-lines",
        type=int,
        default=0,
        help="read, decode and write --input in chunks of this many lines, so memory does not grow with "
        "the input (0: all at once). Sampling seeds depend on the chunking",
    )
    add_skip_argument(io)
    io.add_argument("--remove-bpe", choices=["auto", "bpe", "spm", "none"], default="auto",
                    help="subword kind to undo (auto: from the data's meta.json)")  # fmt: skip
    io.add_argument("--detok", choices=["auto", "moses", "none"], default="auto",
                    help="Moses detokenization (auto: if the data was Moses-tokenized)")  # fmt: skip

    add_dataclass_arguments(p, SearchConfig)
    p.add_argument("--seed", type=int, default=1, help="sampling seed")

    r = p.add_argument_group("runtime")
    r.add_argument("--max-tokens", type=int, default=6000, help="source tokens per batch (0: no limit)")
    r.add_argument("--batch-size", type=int, default=128, help="sentences per batch (0: no limit)")
    r.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    r.add_argument("--bf16", action="store_true", help="bf16 autocast (meant for GPUs)")
    r.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: torch's default)")
    r.add_argument(
        "--workers",
        type=int,
        default=1,
        help="CPU: decode this many batches at once, one thread each (usually faster than --threads "
        "for small models; set it to the cores you have). Ignored on a GPU",
    )
    r.add_argument(
        "--cpu-gemm",
        choices=CPU_GEMMS,
        default="auto",
        help="fp32 CPU matmuls: MKL or oneDNN (auto: oneDNN on AVX-512 CPUs for d >= 256 and batches "
        "of >= 256 sentences x beam, where it was measured faster)",
    )
    r.add_argument("--no-progress", action="store_true")
    add_decoding_arguments(p, SEARCH_KEYS + RUNTIME_KEYS)


def target_language(flag: str | None, checkpoint_data: dict, data_meta: dict) -> str | None:
    """The language hypotheses are detokenized in: ``--target-lang``, else the target language the
    checkpoint was trained on, else the data directory's. Never a source language: the Snakemake
    rules always pass --target-lang, so only a hand-run ``translate`` relies on this default."""
    return flag or checkpoint_data.get("tgt_lang") or data_meta.get("tgt_lang")


def _search_config(args: argparse.Namespace) -> SearchConfig:
    return dataclass_from_args(SearchConfig, args)


def _placeholders_if_diverged(args: argparse.Namespace) -> bool:
    """Empty hypotheses, one per source sentence, in every requested output of a diverged run."""
    text = [p for p in (args.output, args.output_generate, args.output_subword, args.output_jsonl) if p]
    if not is_diverged(args.skip_if_diverged):
        return False
    if args.split:
        if not args.data_dir:
            raise ConfigError(
                "--skip-if-diverged with --split needs --data-dir (the checkpoint may not exist)"
            )
        lines = split_size(args.data_dir, args.split)
    else:
        start, stop = shard_range(count_lines(args.input or args.raw_input), args.shard)
        lines = stop - start
    return skip_diverged(args.skip_if_diverged, text=text, lines=lines)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    entry = apply_decoding(args)
    cfg = _search_config(args)  # validates the search flags before anything heavy happens
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    for flag in ("max_tokens", "batch_size", "threads"):
        if getattr(args, flag) < 0:
            raise ConfigError(f"--{flag.replace('_', '-')} must be >= 0")
    if args.max_tokens == 0 and args.batch_size == 0:
        raise ConfigError("--max-tokens and --batch-size cannot both be 0 (unlimited)")
    if args.buffer_lines < 0:
        raise ConfigError(f"--buffer-lines must be >= 0, got {args.buffer_lines}")
    if (args.shard or args.buffer_lines) and (args.input is None or args.input == "-"):
        raise ConfigError("--shard and --buffer-lines need --input FILE (they read it twice)")
    if args.skip_if_diverged and _placeholders_if_diverged(args):
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # beam search re-allocates the same multi-MB tensors every step
    device = resolve_device(args.device)
    check_cpu_gemm(args.cpu_gemm, device, args.bf16)

    from pipeline_lib.checkpoint import load_model  # torch-heavy; imported when used

    model, meta = load_model(args.checkpoint, device)
    info = resolve_data(meta, args.data_dir, args.checkpoint)
    if len(info.vocab) != model.config.tgt_vocab_size:
        raise ConfigError(
            f"{info.bin_dir / 'vocab.txt'} has {len(info.vocab)} entries but the model's vocabulary is "
            f"{model.config.tgt_vocab_size}"
        )
    data = meta.get("data") or {}
    tgt_lang = target_language(args.target_lang, data, info.meta)
    max_pos = model.config.max_positions
    if args.shard or args.buffer_lines:
        total, chunks = iter_text_sources(
            args.input, info.vocab, max_pos, args.shard, args.buffer_lines or 1 << 62
        )
        origin = f"{args.input}" + (f" shard {args.shard[0]}/{args.shard[1]}" if args.shard else "")
    else:
        if args.raw_input is not None:
            from pipeline_lib.data.raw_text import SourcePreparer, text_recipe

            text_meta = Path(args.text_meta) if args.text_meta else None
            prepare = SourcePreparer(text_recipe(info.bin_dir, text_meta))
            lines = prepare(read_raw_lines(args.raw_input))
            sources = encode_lines(lines, info.vocab, max_pos, args.raw_input)
        elif args.input is not None:
            sources = read_text_sources(args.input, info.vocab, max_pos)
        else:
            src_lang = args.source_lang or data.get("src_lang") or info.meta.get("src_lang")
            if not src_lang:
                raise ConfigError("--source-lang is needed with --split (the checkpoint does not record it)")
            sources = read_binarized_sources(info, args.split, src_lang, tgt_lang, max_pos)
        total, chunks, origin = len(sources.ids), iter([(0, sources)]), sources.origin

    subword = info.meta.get("subword", "none") if args.remove_bpe == "auto" else args.remove_bpe
    moses = bool(info.meta.get("moses_tokenized", False)) if args.detok == "auto" else args.detok == "moses"
    if moses and not tgt_lang:
        raise ConfigError("--target-lang is needed for Moses detokenization (the data does not record it)")
    post = Postprocess(subword=subword, moses_lang=tgt_lang if moses else None)

    log.info(
        "translate %d sentences from %s on %s: %s, beam %d, lenpen %g, max len %g*src+%d%s%s",
        total, origin, device, model.config.describe(), cfg.beam, cfg.lenpen,
        cfg.max_len_a, cfg.max_len_b, ", sampling" if cfg.sampling else "",
        f" (decoding entry {entry})" if entry else "",
    )  # fmt: skip
    start = time.perf_counter()
    done = generated = 0
    writer = OutputWriter(
        output=args.output,
        output_subword=args.output_subword,
        output_generate=args.output_generate,
        output_jsonl=args.output_jsonl,
    )
    with writer:
        for first, sources in chunks:
            _warn_if_unknown(sources)
            hyps = translate(
                model,
                sources.ids,
                cfg,
                max_tokens=args.max_tokens or None,
                batch_size=args.batch_size or None,
                bf16=args.bf16,
                # distinct per chunk: batch numbers restart in every chunk, and a chunk has fewer
                # batches than lines, so first + batch never repeats
                seed=args.seed + first,
                progress=not args.no_progress,
                workers=args.workers,
                cpu_gemm=args.cpu_gemm,
            )
            writer.write(hyps, render(hyps, info.vocab, post), sources.text, sources.references, first)
            done += len(hyps)
            generated += sum(len(nbest[0].tokens) + 1 for nbest in hyps if nbest)
            if first:
                log.info("%d of %d sentences done", done, total)
    elapsed = time.perf_counter() - start
    log.info(
        "decoded %d sentences, %d tokens (best hyps, </s> incl.) in %.1fs: %.1f sent/s, %.1f tok/s",
        done, generated, elapsed, done / max(elapsed, 1e-9), generated / max(elapsed, 1e-9),
    )  # fmt: skip
    return 0


def _warn_if_unknown(sources: Sources) -> None:
    if sources.tokens and sources.unk_tokens / sources.tokens > 0.05:
        log.warning(
            "%s: %.1f%% of source tokens are <unk>: is the input segmented with the training BPE/SPM?",
            sources.origin,
            100 * sources.unk_tokens / sources.tokens,
        )
