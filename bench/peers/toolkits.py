"""The command lines of each toolkit for bench/compare.py: preprocessing, training and decoding.

Every toolkit trains the same model on the same text: 6L-6L Transformer, d=256, 4 heads, FFN 1024,
ReLU, sinusoidal positions, all embeddings shared (joint vocabulary), dropout 0.1 (attention and
activation dropout 0), label smoothing 0.1, fp32, Adam (0.9, 0.98) with an inverse-sqrt warm-up (4000
updates: the learning rate never matters for speed), no gradient clipping, ~4096 tokens per batch,
no data-loader worker processes (the machine has 2 cores; every toolkit gets the same 2 threads).
Post-LN everywhere except OpenNMT-py, which only has pre-LN.

Decoding: beam 4, 128 sentences per batch, length penalty 1 (each toolkit's own formula), two modes:
``fixed`` (every output exactly FIXED_LEN tokens + </s>) and ``natural`` (the model stops where it likes,
capped at 1.2 * source length + 10 or the closest the toolkit offers). Back-translation's searches, fairseq
and ours only: ``sample`` (unrestricted ancestral sampling, one sample per sentence, as Edunov et al. 2018)
and ``topk10`` (sampling among the 10 most likely), both with the natural length cap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FIXED_LEN = 30
# decoding mode -> top-k of a sampling mode (0: the full distribution); modes not listed are beam search
SAMPLING_MODES = {"sample": 0, "topk10": 10}
DECODE_BATCH = 128
BEAM = 4


@dataclass(frozen=True)
class Shape:
    encoder_layers: int = 6
    decoder_layers: int = 6
    d_model: int = 256
    ffn: int = 1024
    heads: int = 4

    def describe(self) -> str:
        return f"{self.encoder_layers}L-{self.decoder_layers}L d={self.d_model} heads={self.heads} ffn={self.ffn}"


PRESETS = {
    "small": Shape(),  # the CPU bar of issue 8
    "base": Shape(d_model=512, ffn=2048, heads=8),
    "big": Shape(d_model=1024, ffn=4096, heads=16),  # the back-translation reverse model
}


@dataclass(frozen=True)
class Setup:
    raw: Path  # train/valid/test .src/.tgt text, whitespace-tokenized
    work: Path  # this toolkit's own directory
    updates: int  # total updates (warm-up + timed)
    max_tokens: int
    threads: int
    max_src_len: int  # longest test source, for the natural-mode cap of toolkits with an absolute cap
    shape: Shape = Shape()
    device: str = "cpu"  # "cuda": fairseq and ours only
    precision: str = "fp32"  # "bf16": each toolkit's own bf16 mode (GPU)
    decode_batch: int = DECODE_BATCH
    beam: int = BEAM
    # micro-batches per update (fairseq and ours on a GPU): max_tokens // update_freq each, the same
    # max_tokens per update; how the authors split a V100's update, or how the plan shapes it for a card
    update_freq: int = 1
    extra_train: tuple[str, ...] = ()  # ours: more `train` flags, appended


@dataclass(frozen=True)
class Command:
    module: str  # run as ``python shim.py ... -- module args``
    args: list[str]
    min_len: int = 0  # shim --min-len (Sockeye only)


@dataclass(frozen=True)
class DecodeTiming:
    seconds: float  # the toolkit's own timer around its search loop (model loading excluded)
    source: str  # which log line it came from


def _float(pattern: str, text: str) -> float | None:
    m = re.findall(pattern, text)
    return float(m[-1].replace(",", "")) if m else None


def _sampling(args: list[str], mode: str) -> list[str]:
    """fairseq's and our sampling flags (the same names): one sample per sentence instead of the beam."""
    if mode not in SAMPLING_MODES:
        return args
    args = list(args)
    args[args.index("--beam") + 1] = "1"
    topk = SAMPLING_MODES[mode]
    return [*args, "--sampling", *(["--sampling-topk", str(topk)] if topk else [])]


class Toolkit:
    name = ""
    label = ""
    layer_norm = "post-LN"
    note = ""
    gpu_precisions: tuple[str, ...] = ()  # what it runs with --device cuda in this benchmark

    def preprocess(self, s: Setup) -> list[Command]:
        raise NotImplementedError

    def train(self, s: Setup) -> Command:
        raise NotImplementedError

    def train_outputs(self, s: Setup) -> list[Path]:
        """What a training run writes: removed before compare.py --rounds trains again, since a left-over
        last checkpoint would make fairseq and ours resume instead of train."""
        raise NotImplementedError

    def decode(self, s: Setup, mode: str, out: Path) -> Command:
        raise NotImplementedError

    def hypotheses(self, out: Path, log: str) -> list[str]:
        return out.read_text(encoding="utf-8").splitlines()

    def decode_timing(self, log: str, sentences: int) -> DecodeTiming | None:
        raise NotImplementedError

    def decode_length_options(self, mode: str, s: Setup) -> str:
        raise NotImplementedError


class Fairseq(Toolkit):
    name, label = "fairseq", "fairseq-fixed 0.12.3.1"
    # fairseq 0.12's --bf16 "implies --tpu" (it asks torch_xla for a device): its GPU mixed precision is
    # --fp16 (fp16 model, fp32 master weights, dynamic loss scaling).
    gpu_precisions = ("fp32", "fp16")

    @staticmethod
    def _runtime(s: Setup) -> list[str]:
        return (["--cpu"] if s.device == "cpu" else []) + (["--fp16"] if s.precision == "fp16" else [])

    def preprocess(self, s: Setup) -> list[Command]:
        r = s.raw
        args = [
            "--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(r / "train"),
            "--validpref", str(r / "valid"), "--testpref", str(r / "test"), "--destdir", str(s.work / "bin"),
            "--joined-dictionary", "--workers", str(s.threads),
        ]  # fmt: skip
        return [Command("fairseq_cli.preprocess", args)]

    def train(self, s: Setup) -> Command:
        m = s.shape
        args = [
            str(s.work / "bin"), "--arch", "transformer", "--encoder-layers", str(m.encoder_layers),
            "--decoder-layers", str(m.decoder_layers), "--encoder-embed-dim", str(m.d_model),
            "--decoder-embed-dim", str(m.d_model), "--encoder-ffn-embed-dim", str(m.ffn),
            "--decoder-ffn-embed-dim", str(m.ffn), "--encoder-attention-heads", str(m.heads),
            "--decoder-attention-heads", str(m.heads),
            "--share-all-embeddings", "--dropout", "0.1", "--attention-dropout", "0", "--activation-dropout", "0",
            "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
            "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt",
            "--warmup-updates", "4000", "--warmup-init-lr", "1e-7", "--clip-norm", "0",
            "--max-tokens", str(s.max_tokens // s.update_freq), "--update-freq", str(s.update_freq),
            "--max-update", str(s.updates), "--num-workers", "0",
            "--seed", "1", "--disable-validation", "--no-epoch-checkpoints", "--save-dir", str(s.work / "ckpt"),
            "--log-format", "json", "--log-interval", "1", "--no-progress-bar", *self._runtime(s),
        ]  # fmt: skip
        return Command("fairseq_cli.train", args)

    def train_outputs(self, s: Setup) -> list[Path]:
        return [s.work / "ckpt"]

    def decode(self, s: Setup, mode: str, out: Path) -> Command:
        args = [
            str(s.work / "bin"), "--path", str(s.work / "ckpt" / "checkpoint_last.pt"), "--gen-subset", "test",
            "--beam", str(s.beam), "--nbest", "1", "--batch-size", str(s.decode_batch), "--lenpen", "1",
            # without it fairseq-generate silently drops the longest sentences (REFERENCE.md)
            "--required-batch-size-multiple", "1", "--num-workers", "0", "--seed", "1", *self._runtime(s),
        ]  # fmt: skip
        if mode == "fixed":
            args += ["--min-len", str(FIXED_LEN), "--max-len-a", "0", "--max-len-b", str(FIXED_LEN)]
        else:
            args += ["--max-len-a", "1.2", "--max-len-b", "10"]
        return Command("fairseq_cli.generate", _sampling(args, mode))

    def decode_length_options(self, mode: str, s: Setup) -> str:
        if mode == "fixed":
            return f"--min-len {FIXED_LEN} --max-len-a 0 --max-len-b {FIXED_LEN}"
        return "--max-len-a 1.2 --max-len-b 10"

    def hypotheses(self, out: Path, log: str) -> list[str]:
        hyps: dict[int, str] = {}
        for line in log.splitlines():
            if line.startswith("H-"):
                head, _score, text = (line.split("\t") + ["", ""])[:3]
                hyps[int(head[2:])] = text
        return [hyps[i] for i in sorted(hyps)]

    def decode_timing(self, log: str, sentences: int) -> DecodeTiming | None:
        rate = _float(r"Translated [\d,]+ sentences \([\d,]+ tokens\) in [\d.]+s \(([\d.]+) sentences/s", log)
        if rate is None:
            return None
        return DecodeTiming(sentences / rate, "fairseq-generate 'Translated ... sentences/s' (search only)")


class OpenNMT(Toolkit):
    name, label = "opennmt", "OpenNMT-py 3.5.1"
    layer_norm = "pre-LN"
    note = "OpenNMT-py has no post-LN option: pre-LN (its only layout)"

    def _config(self, s: Setup) -> Path:
        r, w, m = s.raw, s.work, s.shape
        cfg = f"""# written by bench/compare.py
save_data: {w}/data
src_vocab: {w}/vocab.shared
share_vocab: true
overwrite: true
data:
    corpus_1:
        path_src: {r}/train.src
        path_tgt: {r}/train.tgt
    valid:
        path_src: {r}/valid.src
        path_tgt: {r}/valid.tgt
save_model: {w}/model
encoder_type: transformer
decoder_type: transformer
enc_layers: {m.encoder_layers}
dec_layers: {m.decoder_layers}
hidden_size: {m.d_model}
word_vec_size: {m.d_model}
transformer_ff: {m.ffn}
heads: {m.heads}
add_qkvbias: true
position_encoding: true
share_embeddings: true
share_decoder_embeddings: true
dropout: [0.1]
attention_dropout: [0.0]
label_smoothing: 0.1
optim: adam
adam_beta1: 0.9
adam_beta2: 0.98
learning_rate: 2.0
decay_method: noam
warmup_steps: 4000
max_grad_norm: 0
param_init: 0.0
param_init_glorot: true
batch_type: tokens
batch_size: {s.max_tokens}
valid_batch_size: 512
normalization: tokens
accum_count: [1]
train_steps: {s.updates}
valid_steps: 1000000
save_checkpoint_steps: {s.updates}
report_every: 1
num_workers: 0
seed: 1
model_dtype: fp32
"""
        path = w / "onmt.yaml"
        path.write_text(cfg, encoding="utf-8")
        return path

    def preprocess(self, s: Setup) -> list[Command]:
        return [Command("onmt.bin.build_vocab", ["-config", str(self._config(s)), "-n_sample", "-1"])]

    def train(self, s: Setup) -> Command:
        return Command("onmt.bin.train", ["-config", str(self._config(s))])

    def train_outputs(self, s: Setup) -> list[Path]:
        return [s.work / f"model_step_{s.updates}.pt"]

    def decode(self, s: Setup, mode: str, out: Path) -> Command:
        args = [
            "-model", str(s.work / f"model_step_{s.updates}.pt"), "-src", str(s.raw / "test.src"),
            "-output", str(out), "-beam_size", str(s.beam), "-n_best", "1", "-batch_size", str(s.decode_batch),
            "-batch_type", "sents", "-report_time", "-seed", "1",
        ]  # fmt: skip
        return Command("onmt.bin.translate", args + self.decode_length_options(mode, s).split())

    def decode_length_options(self, mode: str, s: Setup) -> str:
        if mode == "fixed":
            return f"-min_length {FIXED_LEN} -max_length {FIXED_LEN}"
        return f"-max_length {int(1.2 * s.max_src_len + 10)}"  # only an absolute cap: 1.2 * longest + 10

    def decode_timing(self, log: str, sentences: int) -> DecodeTiming | None:
        avg_ms = _float(r"Average translation time \(ms\): ([\d.]+)", log)
        if avg_ms is not None and avg_ms > 0:
            return DecodeTiming(
                avg_ms * sentences / 1000, "onmt_translate -report_time 'Average translation time'"
            )
        total = _float(r"Total translation time \(s\): ([\d.]+)", log)
        return None if total is None else DecodeTiming(total, "onmt_translate 'Total translation time'")


class Sockeye(Toolkit):
    name, label = "sockeye", "Sockeye 3.1.34"
    note = "post-LN via --transformer-preprocess '' --transformer-postprocess drn"

    def preprocess(self, s: Setup) -> list[Command]:
        r = s.raw
        args = [
            "--source", str(r / "train.src"), "--target", str(r / "train.tgt"), "--output", str(s.work / "prepared"),
            "--shared-vocab", "--max-seq-len", "128:128", "--seed", "1", "--max-processes", str(s.threads),
            "--quiet",
        ]  # fmt: skip
        return [Command("sockeye.prepare_data", args)]

    def train(self, s: Setup) -> Command:
        r, m = s.raw, s.shape
        args = [
            "--prepared-data", str(s.work / "prepared"), "--validation-source", str(r / "valid.src"),
            "--validation-target", str(r / "valid.tgt"), "--output", str(s.work / "model"), "--overwrite-output",
            "--use-cpu", "--seed", "1", "--num-layers", f"{m.encoder_layers}:{m.decoder_layers}",
            "--transformer-model-size", str(m.d_model), "--transformer-attention-heads", str(m.heads),
            "--transformer-feed-forward-num-hidden", str(m.ffn), "--num-embed", f"{m.d_model}:{m.d_model}",
            "--transformer-activation-type", "relu",
            "--transformer-preprocess", "", "--transformer-postprocess", "drn",
            "--transformer-dropout-prepost", "0.1", "--transformer-dropout-attention", "0",
            "--transformer-dropout-act", "0", "--embed-dropout", "0:0",
            "--weight-tying-type", "src_trg_softmax", "--label-smoothing", "0.1", "--dtype", "float32",
            "--optimizer", "adam", "--optimizer-betas", "0.9:0.98", "--initial-learning-rate", "0.0005",
            "--learning-rate-scheduler-type", "inv-sqrt-decay", "--learning-rate-warmup", "4000",
            "--gradient-clipping-type", "none", "--batch-type", "max-word", "--batch-size", str(s.max_tokens),
            "--max-updates", str(s.updates), "--checkpoint-interval", str(s.updates),
            "--decode-and-evaluate", "0", "--keep-last-params", "1", "--max-seq-len", "128:128",
        ]  # fmt: skip
        return Command("sockeye.train", args)

    def train_outputs(self, s: Setup) -> list[Path]:
        return [s.work / "model"]

    def decode(self, s: Setup, mode: str, out: Path) -> Command:
        args = [
            "--models", str(s.work / "model"), "--input", str(s.raw / "test.src"), "--output", str(out),
            "--use-cpu", "--beam-size", str(s.beam), "--batch-size", str(s.decode_batch), "--seed", "1",
            "--length-penalty-alpha", "1.0", "--length-penalty-beta", "0.0",
        ]  # fmt: skip
        if mode == "fixed":
            return Command(
                "sockeye.translate", [*args, "--max-output-length", str(FIXED_LEN)], min_len=FIXED_LEN
            )
        return Command(
            "sockeye.translate", args + ["--max-output-length", str(int(1.2 * s.max_src_len + 10))]
        )

    def decode_length_options(self, mode: str, s: Setup) -> str:
        if mode == "fixed":
            return (
                f"--max-output-length {FIXED_LEN} + fairseq's --min-len {FIXED_LEN} rule patched in by "
                "bench/peers/shim.py (Sockeye has no minimum length)"
            )
        return (
            f"--max-output-length {int(1.2 * s.max_src_len + 10)} (absolute cap: 1.2 * longest source + 10)"
        )

    def decode_timing(self, log: str, sentences: int) -> DecodeTiming | None:
        total = _float(r"Processed \d+ lines\. Total time: ([\d.]+)", log)
        return None if total is None else DecodeTiming(total, "sockeye-translate 'Processed ... Total time'")


class DeepNMT(Toolkit):
    name, label = "deepnmt", "deepnmt (pipeline_lib)"
    gpu_precisions = ("fp32", "bf16", "fp16")

    def preprocess(self, s: Setup) -> list[Command]:
        args = [
            "binarize",
            "--in-dir",
            str(s.raw),
            "--out-dir",
            str(s.work / "bin"),
            "--src",
            "src",
            "--tgt",
            "tgt",
        ]
        return [Command("pipeline_lib", args)]

    def train(self, s: Setup) -> Command:
        m = s.shape
        if s.device == "cpu":
            # One micro-batch per thread (--cpu-workers, pipeline_lib/cpu/threads.py): at d=256 the matmuls
            # are too small for two OpenMP threads to share one well. The update is the same ~max_tokens
            # target tokens: threads micro-batches of max_tokens / threads, gradients summed.
            workers = s.threads
            runtime = ["--max-tokens", str(s.max_tokens // workers), "--update-freq", str(workers),
                       "--cpu-workers", str(workers)]  # fmt: skip
        else:
            runtime = [
                "--max-tokens",
                str(s.max_tokens // s.update_freq),
                "--update-freq",
                str(s.update_freq),
            ]
        amp = {"fp32": "none", "bf16": "bf16", "fp16": "fp16"}[s.precision]
        args = [
            "train", "--data", str(s.work / "bin"), "--source-lang", "src", "--target-lang", "tgt",
            "--save-dir", str(s.work / "ckpt"), "--arch", "base", "--encoder-layers", str(m.encoder_layers),
            "--decoder-layers", str(m.decoder_layers), "--d-model", str(m.d_model), "--ffn-dim", str(m.ffn),
            "--heads", str(m.heads), "--residual", "post_ln",
            "--dropout", "0.1", "--attention-dropout", "0", "--activation-dropout", "0",
            "--label-smoothing", "0.1", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4",
            "--warmup-updates", "4000", "--warmup-init-lr", "1e-7", "--clip-norm", "0", *runtime,
            "--max-update", str(s.updates), "--device", s.device, "--amp", amp,
            "--num-threads", str(s.threads), "--seed", "1", "--log-interval", "1", "--progress", "none",
            *s.extra_train,
        ]  # fmt: skip
        return Command("pipeline_lib", args)

    def train_outputs(self, s: Setup) -> list[Path]:
        return [s.work / "ckpt"]

    def decode(self, s: Setup, mode: str, out: Path) -> Command:
        args = [
            "translate", "--checkpoint", str(s.work / "ckpt" / "checkpoint_last.pt"), "--split", "test",
            "--output", str(out), "--beam", str(s.beam), "--lenpen", "1", "--batch-size", str(s.decode_batch),
            "--max-tokens", "0", "--device", s.device, "--workers", str(s.threads), "--no-progress",
            # translate has one 16-bit mode, bf16 autocast: used for --precision fp16 as well
            "--remove-bpe", "none", "--detok", "none", *(["--bf16"] if s.precision != "fp32" else []),
        ]  # fmt: skip
        return Command("pipeline_lib", _sampling(args + self.decode_length_options(mode, s).split(), mode))

    def decode_length_options(self, mode: str, s: Setup) -> str:
        if mode == "fixed":
            return f"--min-len {FIXED_LEN} --max-len-a 0 --max-len-b {FIXED_LEN}"
        return "--max-len-a 1.2 --max-len-b 10"

    def decode_timing(self, log: str, sentences: int) -> DecodeTiming | None:
        m = re.findall(r"decoded (\d+) sentences, \d+ tokens .* in [\d.]+s: ([\d.]+) sent/s", log)
        if not m:
            return None
        n, rate = int(m[-1][0]), float(m[-1][1])
        return DecodeTiming(n / rate, "translate 'decoded ... sent/s' (search only)")


TOOLKITS: dict[str, Toolkit] = {t.name: t for t in (Fairseq(), OpenNMT(), Sockeye(), DeepNMT())}
