"""Run a toolkit's own entry point with uniform instrumentation (used by bench/compare.py).

    <toolkit venv>/bin/python bench/peers/shim.py --toolkit fairseq --threads 2 --record steps.json \\
        [--min-len 30] -- fairseq_cli.train DATA --arch transformer ...

Runs inside the toolkit's own venv (standard library + torch + the toolkit only). It

* pins torch to ``--threads`` intra-op threads (1 inter-op thread), before the toolkit starts;
* training: registers a *global* optimizer step post-hook (torch.optim.optimizer), so every toolkit's
  update is timed the same way: the time between two consecutive optimizer steps (data loading,
  forward, backward, step and the toolkit's own logging all included). The real target tokens of each
  update (non-padding labels, </s> included, as fairseq's ``ntokens``) are counted by wrapping the one
  toolkit function that receives the batch: fairseq ``Trainer.train_step``, OpenNMT-py
  ``Trainer._gradient_accumulation``, Sockeye ``EarlyStoppingTrainer._step``, ours
  ``Updater.accumulate_gradients``;
  Sockeye's own speed log counts padded *source* tokens, so it is not used.
* ``--min-len N`` (Sockeye decoding only): Sockeye 3.1.34 has no minimum output length; this applies
  fairseq's ``--min-len`` rule (</s> forbidden for the first N steps) by setting the </s> score to +inf in
  ``_SingleModelInference.decode_step`` for the first N steps of every batch.

``--record`` gets ``{"steps": [[perf_counter, target_tokens], ...], "start": t0, "end": t1}`` (plus
``cuda_max_allocated_mib`` on a GPU), written even when the toolkit exits through SystemExit. On a GPU the
step times are host times: both GPU-ready toolkits read the loss every update (``--log-interval 1``),
which waits for the GPU, so the time between two steps is the update's real time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
import time


def _parse() -> tuple[argparse.Namespace, list[str]]:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: shim.py [options] -- module [args...]")
    cut = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--toolkit", required=True, choices=["fairseq", "opennmt", "sockeye", "deepnmt"])
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--record", default=None, help="write per-update timestamps and target tokens here")
    p.add_argument("--min-len", type=int, default=0, help="Sockeye decoding: forbid </s> for N steps")
    p.add_argument(
        "--no-cudnn-attention",
        action="store_true",
        help="torch.backends.cuda.enable_cudnn_sdp(False) before the toolkit starts (what deepnmt does itself)",
    )
    return p.parse_args(argv[:cut]), argv[cut + 1 :]


class Recorder:
    def __init__(self) -> None:
        self.pending = 0
        self.steps: list[tuple[float, int]] = []
        self.start = time.perf_counter()
        self.cuda_max_allocated = 0.0  # MiB; read at every step: toolkits reset the peak counter themselves

    def add_tokens(self, n: int) -> None:
        self.pending += int(n)

    def step_hook(self, optimizer, args, kwargs) -> None:  # noqa: ANN001 (torch hook signature)
        self.steps.append((time.perf_counter(), self.pending))
        self.pending = 0
        import torch

        if torch.cuda.is_initialized():
            peak = torch.cuda.max_memory_allocated() / 2**20
            self.cuda_max_allocated = max(self.cuda_max_allocated, peak)

    def dump(self, path: str) -> None:
        record = {"steps": self.steps, "start": self.start, "end": time.perf_counter()}
        if self.cuda_max_allocated:
            record["cuda_max_allocated_mib"] = self.cuda_max_allocated
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(tmp, path)


def _wrap(cls: type, name: str, before) -> None:  # noqa: ANN001
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):  # noqa: ANN001, ANN202
        before(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    setattr(cls, name, wrapper)


def _count_tokens(toolkit: str, rec: Recorder) -> None:
    if toolkit == "fairseq":
        from fairseq.trainer import Trainer

        def fairseq_tokens(self, samples, *a, **k):  # noqa: ANN001, ANN202
            # ntokens = non-pad target tokens incl. </s>; a dummy batch (ntokens 0) adds nothing.
            rec.add_tokens(sum(int(s.get("ntokens", 0)) for s in samples if s))

        _wrap(Trainer, "train_step", fairseq_tokens)
    elif toolkit == "opennmt":
        from onmt.trainer import Trainer

        def onmt_tokens(self, true_batches, *a, **k):  # noqa: ANN001, ANN202
            pad = self.train_loss.padding_idx
            # batch["tgt"] is (B, T, feats) with <s> first; the loss sees tgt[:, 1:].
            rec.add_tokens(sum(int(b["tgt"][:, 1:, 0].ne(pad).sum()) for b in true_batches))

        _wrap(Trainer, "_gradient_accumulation", onmt_tokens)
    elif toolkit == "sockeye":
        from sockeye import constants as C
        from sockeye.training import EarlyStoppingTrainer

        def sockeye_tokens(self, batch, *a, **k):  # noqa: ANN001, ANN202
            labels = batch.labels[C.TARGET_LABEL_NAME]  # (B, T): target ids + </s>, padded with 0
            rec.add_tokens(int((labels != C.PAD_ID).sum()))

        _wrap(EarlyStoppingTrainer, "_step", sockeye_tokens)
    elif toolkit == "deepnmt":
        from pipeline_lib.train.update import Updater

        # every update's forward and backward, plain or --deferred-stats; an fp16 overflow found one
        # update late runs that update's batches again, which trains them once: counted once
        def deepnmt_tokens(self, batches, total_tokens, *a, **k):  # noqa: ANN001, ANN202
            rec.add_tokens(int(total_tokens))

        def deepnmt_replay(self, batches, total_tokens, *a, **k):  # noqa: ANN001, ANN202
            rec.add_tokens(-int(total_tokens))

        _wrap(Updater, "accumulate_gradients", deepnmt_tokens)
        _wrap(Updater, "replay", deepnmt_replay)


def _sockeye_min_len(min_len: int) -> None:
    from sockeye import beam_search
    from sockeye import constants as C

    cls = beam_search._SingleModelInference
    encode, decode = cls.encode_and_initialize, cls.decode_step

    def encode_and_initialize(self, *args, **kwargs):  # noqa: ANN001, ANN202
        self._bench_step = 0
        return encode(self, *args, **kwargs)

    def decode_step(self, *args, **kwargs):  # noqa: ANN001, ANN202
        scores, states, factors = decode(self, *args, **kwargs)
        self._bench_step = getattr(self, "_bench_step", 0) + 1
        vocab_slice_ids = args[2] if len(args) > 2 else kwargs.get("vocab_slice_ids")
        if vocab_slice_ids is not None:
            raise SystemExit("--min-len does not support a restricted output vocabulary")
        if self._bench_step <= min_len:
            scores[:, C.EOS_ID] = float("inf")  # scores are negative log-probs: inf = never chosen
        return scores, states, factors

    cls.encode_and_initialize, cls.decode_step = encode_and_initialize, decode_step


def main() -> None:
    opts, rest = _parse()
    import torch

    torch.set_num_threads(opts.threads)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    if opts.no_cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)
    rec = Recorder()
    if opts.record:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        register_optimizer_step_post_hook(rec.step_hook)
        _count_tokens(opts.toolkit, rec)
    if opts.min_len:
        if opts.toolkit != "sockeye":
            sys.exit("--min-len is only needed for sockeye (the others have their own option)")
        _sockeye_min_len(opts.min_len)
    module, args = rest[0], rest[1:]
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        if opts.record:
            rec.dump(opts.record)


if __name__ == "__main__":
    main()
