"""The CUDA path: AMP bf16/fp16 training, decoding on the GPU, NCCL and torchrun.

Skipped where torch sees no GPU (CI has none). On a GPU machine: ``python -m pytest tests/train/test_cuda.py``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from train_fixtures import make_bin_dir, read_log, train_args

from pipeline_lib.checkpoint import load_checkpoint, load_model
from pipeline_lib.cli import main
from pipeline_lib.data.indexed import ParallelCorpus
from pipeline_lib.decode.search import SearchConfig
from pipeline_lib.decode.translator import translate
from tests.train.test_deferred_stats import (  # noqa: F401 (a fixture, by name)
    assert_same_fp16_run,
    overflowing_grad_scaler,
    step_sequence,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def gpu_args(bin_dir: Path, save: Path, *extra: str) -> list[str]:
    # argparse keeps the last --device: the fixture's "cpu" is overridden
    return train_args(bin_dir, save, "--device", "cuda", "--dropout", "0", *extra)


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory) -> Path:
    return make_bin_dir(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def fp32_run(bin_dir: Path, tmp_path_factory) -> Path:
    save = tmp_path_factory.mktemp("fp32")
    assert main(gpu_args(bin_dir, save, "--max-epoch", "12")) == 0
    return save


def _learned(save: Path) -> None:
    valid = [r["loss"] for r in read_log(save, "valid")]
    assert valid[-1] < valid[0] - 0.5, valid
    train = read_log(save)
    assert train[-1]["memory_kind"] == "cuda_max_allocated" and train[-1]["memory_mb"] > 0


def test_fp32_training_on_the_gpu_learns(fp32_run: Path) -> None:
    _learned(fp32_run)


@pytest.mark.parametrize("amp", ["bf16", "fp16", "fairseq_fp16"])
def test_mixed_precision_training_learns_with_fp32_master_weights(
    bin_dir: Path, tmp_path: Path, amp: str
) -> None:
    save = tmp_path / amp
    assert main(gpu_args(bin_dir, save, "--max-epoch", "12", "--amp", amp)) == 0
    _learned(save)
    state = load_checkpoint(save / "checkpoint_last.pt")
    assert all(v.dtype == torch.float32 for v in state["model"].values() if v.is_floating_point())
    if amp == "fp16":
        assert state["scaler"]["scale"] > 0  # the GradScaler really ran and was checkpointed
    if amp == "fairseq_fp16":  # fairseq's scaler ran and was checkpointed, with its counters
        assert state["scaler"]["loss_scale"] > 0 and state["scaler"]["iter"] > 0
    # resuming a finished run (scaler state included) finds nothing to do and keeps the log
    before = read_log(save)
    assert main(gpu_args(bin_dir, save, "--max-epoch", "12", "--amp", amp)) == 0
    assert read_log(save) == before


def _valid_sources(bin_dir: Path) -> list[list[int]]:
    corpus = ParallelCorpus(bin_dir, "valid", "xx", "yy")
    return [corpus[i][0].tolist() for i in range(len(corpus))]


def test_gpu_decoding_matches_cpu_and_cache_changes_nothing(fp32_run: Path, bin_dir: Path) -> None:
    sources = _valid_sources(bin_dir)
    cfg = SearchConfig(beam=4, max_len_a=1.0, max_len_b=5)
    cpu_model, _ = load_model(fp32_run / "checkpoint_last.pt", torch.device("cpu"))
    gpu_model, _ = load_model(fp32_run / "checkpoint_last.pt", torch.device("cuda"))
    on_cpu = translate(cpu_model, sources, cfg, progress=False)
    on_gpu = translate(gpu_model, sources, cfg, progress=False)
    uncached = translate(gpu_model, sources, SearchConfig(beam=4, max_len_a=1.0, max_len_b=5, use_cache=False),
                         progress=False)  # fmt: skip
    assert [h[0].tokens for h in on_gpu] == [h[0].tokens for h in on_cpu]
    assert [h[0].tokens for h in uncached] == [h[0].tokens for h in on_gpu]
    for a, b in zip(on_gpu, on_cpu, strict=True):
        assert abs(a[0].score - b[0].score) < 1e-3
    bf16 = translate(gpu_model, sources, cfg, bf16=True, progress=False)
    same = sum(a[0].tokens == b[0].tokens for a, b in zip(bf16, on_gpu, strict=True))
    assert same >= 0.8 * len(sources), f"bf16 decoding agrees with fp32 on only {same}/{len(sources)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(*args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "1",
        "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), *args,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_nccl_process_group_all_reduces_on_the_gpu() -> None:
    # One GPU holds one NCCL rank (NCCL refuses two ranks on one device): a world of one still
    # initialises NCCL and runs a real all-reduce through it.
    proc = _torchrun("-m", "pipeline_lib.train.dist_check", "--device", "cuda")
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["backend"] == "nccl" and record["sum"] == record["expected"] == 1.0


def test_torchrun_training_matches_a_plain_gpu_run(bin_dir: Path, tmp_path: Path) -> None:
    common = ("--max-update", "6")
    assert main(gpu_args(bin_dir, tmp_path / "plain", *common)) == 0
    _torchrun("-m", "pipeline_lib", *gpu_args(bin_dir, tmp_path / "ddp", *common))
    plain = [r["loss"] for r in read_log(tmp_path / "plain")]
    launched = [r["loss"] for r in read_log(tmp_path / "ddp")]
    assert len(plain) == len(launched) == 6
    # cuBLAS / atomics may differ in the last bits between the two processes
    assert launched == pytest.approx(plain, rel=1e-3)


def test_deferred_stats_and_compile_on_the_gpu(bin_dir: Path, tmp_path: Path) -> None:
    """bf16 with --deferred-stats (pinned copies behind an event) gives the plain run's losses exactly;
    --compile on top follows them to bf16 tolerance (its dropout is off here, its kernels differ)."""
    runs = {}
    flags = ("--max-update", "12", "--amp", "bf16", "--pad-to-multiple", "8")
    for name, extra in (("plain", []), ("deferred", ["--deferred-stats"]), ("compiled", ["--deferred-stats", "--compile"])):  # fmt: skip
        assert main(gpu_args(bin_dir, tmp_path / name, *flags, *extra)) == 0
        runs[name] = [r["loss"] for r in read_log(tmp_path / name)]
    assert runs["deferred"] == runs["plain"] and len(runs["plain"]) == 12
    assert runs["compiled"] == pytest.approx(runs["plain"], rel=2e-2)


@pytest.mark.usefixtures("overflowing_grad_scaler")
@pytest.mark.parametrize("amp", ["fp16", "fairseq_fp16"])
def test_deferred_fp16_on_the_gpu_gives_the_plain_run(bin_dir: Path, tmp_path: Path, amp: str) -> None:
    """--deferred-stats with a loss scaler: overflows planted at the start (a scale of 2^24) and mid-run
    (a short growth window) are taken back and their next forward/backward rerun; every update's loss,
    gradient norm, scale and overflow count, and every checkpoint (weights, optimizer, scaler) equal
    the plain run's, dropout on."""
    flags = ("--max-update", "12", "--amp", amp, "--dropout", "0.1", "--weight-decay", "0.01",
             "--save-interval-updates", "3")  # fmt: skip
    if amp == "fairseq_fp16":
        flags += ("--fp16-init-scale", str(2**24), "--fp16-scale-window", "4")
    plain, deferred = tmp_path / "plain", tmp_path / "deferred"
    assert main(gpu_args(bin_dir, plain, *flags)) == 0
    assert main(gpu_args(bin_dir, deferred, *flags, "--deferred-stats")) == 0
    assert_same_fp16_run(plain, deferred)


@pytest.mark.usefixtures("overflowing_grad_scaler")
@pytest.mark.parametrize("amp", ["fp16", "fairseq_fp16"])
def test_deferred_fp16_on_the_gpu_waits_for_it_less(bin_dir: Path, tmp_path: Path, amp: str) -> None:
    """Host reads in the training steps, as on the CPU (the statistics' alone, one per attempt), and the
    synchronising CUDA calls torch's sync debug mode reports over the whole run (steps, the final
    validation and checkpoint): deferred, at least one fewer per update attempt than plain."""
    flags = ("--device", "cuda", "--amp", amp, "--max-tokens", "40")
    if amp == "fairseq_fp16":
        flags += ("--fp16-init-scale", str(2**20))
    syncs, attempts = {}, 0
    for name, extra in (("plain", ()), ("deferred", ("--deferred-stats",))):
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sequence, reads = step_sequence(bin_dir, tmp_path / name, *flags, *extra)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        syncs[name] = sum("synchronizing" in str(w.message) for w in caught)
        attempts = attempts or sequence.count("F")
    assert set(reads) == {("pending_update.py", "read")} and len(reads) == attempts
    print(
        f"{amp}: {attempts} attempts; synchronising calls plain {syncs['plain']}, deferred {syncs['deferred']}"
    )
    assert syncs["deferred"] <= syncs["plain"] - attempts


def test_cuda_graphs_follow_eager(bin_dir: Path, tmp_path: Path) -> None:
    """--compile-mode reduce-overhead (each layer's forward and backward replayed as CUDA graphs, one per
    padded batch shape) gives eager's fp32 losses, through validation and with accumulation too."""
    runs = {}
    flags = ("--max-update", "12", "--pad-to-multiple", "8", "--max-tokens", "100", "--update-freq", "2")
    for name, extra in (("eager", []), ("graphs", ["--compile", "--compile-mode", "reduce-overhead"])):
        assert main(gpu_args(bin_dir, tmp_path / name, *flags, *extra)) == 0
        runs[name] = [r["loss"] for r in read_log(tmp_path / name)]
        runs[name + "_valid"] = [r["loss"] for r in read_log(tmp_path / name, "valid")]
    assert len(runs["eager"]) == 12
    assert runs["graphs"] == pytest.approx(runs["eager"], rel=1e-4)
    assert runs["graphs_valid"] == pytest.approx(runs["eager_valid"], rel=1e-4)
