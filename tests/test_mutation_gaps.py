"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md): each pins a behaviour
of a core module that no other fast test checked, found by a mutant that passed every test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.checkpoint import load_checkpoint, save_checkpoint
from pipeline_lib.cpu.onednn import onednn_available
from pipeline_lib.data import subword
from pipeline_lib.data.moses import (
    CleanConfig,
    LinePreprocessor,
    TokConfig,
    clean_reason,
    init_worker,
    mono_clean_reason,
    process_chunk,
)
from pipeline_lib.decode.search import BOS, EOS, UNK, SearchConfig, generate
from pipeline_lib.errors import CheckpointError, ConfigError
from pipeline_lib.evaluate.metric_registry import ScoreInputs
from pipeline_lib.evaluate.metrics import (
    chrf2,
    sacre_bleu,
    score_chrf2,
    score_sacre_bleu,
    score_ter,
    score_tokenized_bleu,
    ter,
    tokenized_bleu,
)
from pipeline_lib.evaluate.significance import (
    paired_bootstrap,
    pairwise_matrix,
    render_matrix_markdown,
    sign,
    validate,
)
from pipeline_lib.model import build_model
from pipeline_lib.model.admin import AdminProfile, apply_profile, closed_form_profile, resolve_profile
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel
from pipeline_lib.train import loss as loss_module
from pipeline_lib.train.average import average_checkpoints
from pipeline_lib.train.loss import label_smoothed_nll_loss, output_layer_loss, ppl
from pipeline_lib.train.schedule import LrSchedule

# -- checkpoint averaging (pipeline_lib/train/average.py) ------------------------------------------


def _checkpoint(path: Path, weight: torch.Tensor, steps: torch.Tensor, update: int, epoch: int) -> Path:
    """A checkpoint with one float tensor and one integer buffer (a step counter, as some models keep)."""
    state = {
        "model_config": {"d_model": 1},
        "model": {"w": weight, "steps": steps},
        "num_updates": update,
        "epoch": epoch,
        "optimizer": {"state": {}},
        "scaler": {"scale": 1.0},
        "status": "ok",
    }
    save_checkpoint(state, path)
    return path


def test_average_sums_half_precision_in_float32_and_returns_half(tmp_path: Path) -> None:
    # fp16 steps by 2 at 2048: summed in fp16, 2048 + 1 + 1 stays 2048 (mean 682.5 after rounding);
    # summed in fp32 it is 2050, mean 683.33 -> 683.5 in fp16 (fairseq sums in fp32 for this reason).
    values = [2048.0, 1.0, 1.0]
    steps = torch.tensor([7], dtype=torch.int64)
    paths = [
        _checkpoint(tmp_path / f"c{i}.pt", torch.tensor([v], dtype=torch.float16), steps, i, 1)
        for i, v in enumerate(values)
    ]
    averaged = average_checkpoints(paths)["model"]["w"]
    assert averaged.dtype == torch.float16
    assert averaged.item() == torch.tensor([sum(values) / 3], dtype=torch.float16).item() == 683.5


def test_average_keeps_equal_integer_buffers_and_refuses_differing_ones(tmp_path: Path) -> None:
    steps = torch.tensor([3, 4], dtype=torch.int64)
    paths = [
        _checkpoint(tmp_path / f"c{i}.pt", torch.full((2,), float(i)), steps.clone(), i, 1) for i in range(3)
    ]
    out = average_checkpoints(paths)["model"]
    assert out["steps"].dtype == torch.int64
    assert torch.equal(out["steps"], steps)
    torch.testing.assert_close(out["w"], torch.full((2,), 1.0), rtol=0, atol=0)

    odd = _checkpoint(tmp_path / "odd.pt", torch.zeros(2), torch.tensor([3, 5]), 9, 1)
    with pytest.raises(CheckpointError, match="non-float tensor steps differs"):
        average_checkpoints([paths[0], odd])


def test_average_takes_the_newest_position_and_drops_optimizer_state(tmp_path: Path) -> None:
    steps = torch.tensor([0])
    paths = [
        _checkpoint(tmp_path / f"c{epoch}.pt", torch.zeros(1), steps, 100 * epoch, epoch)
        for epoch in (2, 3, 5)
    ]
    out = tmp_path / "avg.pt"
    save_checkpoint(average_checkpoints(paths), out)
    state = load_checkpoint(out)
    assert (state["num_updates"], state["epoch"]) == (500, 5)
    # a normal checkpoint's keys, without the optimizer and AMP scaler of any input
    assert state["optimizer"] is None and state["scaler"] is None


# -- learning-rate schedule (pipeline_lib/train/schedule.py) ---------------------------------------


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)


def test_schedule_defaults_to_inverse_sqrt_and_linear_needs_max_update() -> None:
    s = LrSchedule(_optimizer(), 1e-3, 4, 1e-7)  # fairseq's default scheduler
    assert s.lr_at(16) == pytest.approx(1e-3 * (4 / 16) ** 0.5, rel=1e-12)
    with pytest.raises(ValueError, match="max_update > warmup_updates"):
        LrSchedule(_optimizer(), 1e-3, 0, 1e-7, decay="linear")  # no max_update: no budget to decay over


def test_schedule_state_round_trip_resumes_the_position() -> None:
    s = LrSchedule(_optimizer(), 1e-3, 4, 1e-7)
    s.step_update(9)
    assert s.get_lr() == s.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * (4 / 9) ** 0.5, rel=1e-12)
    state = s.state_dict()
    assert state == {"num_updates": 9, "lr": 1e-3, "warmup_updates": 4, "warmup_init_lr": 1e-7}
    resumed = LrSchedule(_optimizer(), 1e-3, 4, 1e-7)
    resumed.load_state_dict(state)
    assert resumed.num_updates == 9
    assert resumed.get_lr() == s.get_lr()


# -- Moses preprocessing and clean-corpus-n (pipeline_lib/data/moses.py) -------------------------


@pytest.mark.parametrize(
    "kwargs", [{"ratio": 0}, {"min_len": -1}, {"min_len": 3, "max_len": 2}, {"max_len": 0}, {"hard_limit": 0}]
)
def test_clean_config_refuses_impossible_limits(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        CleanConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"ratio": 1.0}, {"min_len": 0, "max_len": 1}, {"min_len": 5, "max_len": 5}, {"hard_limit": 1}]
)
def test_clean_config_accepts_the_tightest_valid_limits(kwargs: dict) -> None:
    CleanConfig(**kwargs)  # ratio 1: equal lengths only; min == max: one length only


def test_clean_reason_checks_each_side_and_keeps_the_bounds() -> None:
    cfg = CleanConfig(ratio=9.0, min_len=3, max_len=250)
    assert clean_reason(2, 3, cfg) == clean_reason(3, 2, cfg) == "too_short"  # one short side is enough
    assert clean_reason(251, 200, cfg) == clean_reason(200, 251, cfg) == "too_long"
    assert clean_reason(250, 250, cfg) is None and clean_reason(3, 3, cfg) is None  # the bounds are kept


def test_mono_clean_reason_keeps_the_bounds() -> None:
    cfg = CleanConfig(min_len=2, max_len=4)
    assert [mono_clean_reason(n, cfg) for n in range(6)] == [
        "empty", "too_short", None, None, None, "too_long"
    ]  # fmt: skip


def test_normalizer_follows_the_language() -> None:
    # normalize-punctuation.perl moves a period inside the closing quote for English only
    no_tok = TokConfig(tokenize=False)
    assert LinePreprocessor("en", no_tok)('He said "yes".') == 'He said "yes."'
    assert LinePreprocessor("fr", no_tok)('il a dit "oui", puis') == 'il a dit "oui", puis'


def test_non_printing_removal_with_and_without_normalization() -> None:
    zero_width = "a\u200bb \u201cx\u201d"  # U+200B is in \p{C}; the typographic quotes are punctuation
    assert LinePreprocessor("en", TokConfig(tokenize=False))(zero_width) == 'ab "x"'
    # remove-non-printing-char alone: the quotes stay typographic (no normalization)
    assert LinePreprocessor("en", TokConfig(normalize=False))(zero_width) == "ab \u201c x \u201d"


def test_tokenizer_options_escape_and_lowercase() -> None:
    assert LinePreprocessor("en", TokConfig(escape=False))("a & b") == "a & b"
    assert LinePreprocessor("en", TokConfig())("a & b") == "a &amp; b"
    assert LinePreprocessor("en", TokConfig(lowercase=True))("Hello World") == "hello world"


def test_process_chunk_hard_limit_counts_every_row_and_goes_on() -> None:
    init_worker(("en", "fr"), TokConfig(tokenize=False), CleanConfig(hard_limit=3, ratio=9.0))
    rows = [("a b c d", "x"), ("a b c", "x y z"), ("a b c d e", "x"), ("a", "b")]
    out, stats = process_chunk(rows)
    assert out == [None, ("a b c", "x y z"), None, ("a", "b")]  # exactly hard_limit tokens is kept
    assert stats == {"over_hard_limit": 2}


def test_process_chunk_monolingual_rows_are_cleaned_alone() -> None:
    init_worker(("en",), TokConfig(tokenize=False), CleanConfig(min_len=2, max_len=3))
    out, stats = process_chunk([("a",), ("a b",), ("a b c d",), ("",)])
    assert out == [None, ("a b",), None, None]
    assert stats == {"too_short": 1, "too_long": 1, "empty": 1}


def test_process_chunk_refuses_a_row_with_the_wrong_number_of_columns() -> None:
    init_worker(("en", "fr"), TokConfig(tokenize=False), None)
    with pytest.raises(ValueError):
        process_chunk([("a", "b", "c")])  # never silently cut to the languages given


# -- label-smoothed loss (pipeline_lib/train/loss.py) --------------------------------------------


def test_ppl_is_two_to_the_bits_capped() -> None:
    assert [ppl(0.0), ppl(1.0), ppl(3.0)] == [1.0, 2.0, 8.0]
    assert ppl(1e4) == 2.0**100  # finite for a diverged run


def test_no_smoothing_is_plain_nll_even_with_a_masked_class() -> None:
    # a -inf logit (a class masked out) must not turn epsilon=0 into 0 * inf = nan
    logits = torch.tensor([[0.0, 1.0, float("-inf")], [2.0, 0.0, float("-inf")]])
    target = torch.tensor([1, 0])
    loss, nll = label_smoothed_nll_loss(logits, target, 0.0, pad=-1)
    want = -(torch.log_softmax(logits, dim=-1)[[0, 1], [1, 0]]).sum()
    assert torch.isfinite(loss) and loss.item() == pytest.approx(want.item(), rel=1e-6)
    assert nll.item() == pytest.approx(want.item(), rel=1e-6)


def test_chunked_loss_shifts_each_row_by_its_own_max() -> None:
    # rows whose logits differ by 300: one shift for the whole chunk would underflow exp() of the
    # small row to 0 and give an infinite loss
    weight = torch.eye(4)
    hidden = torch.tensor([[0.0, 1.0, 0.0, 0.0], [300.0, 0.0, 0.0, 0.0]])
    target = torch.tensor([1, 2])
    loss, nll = output_layer_loss(hidden, weight, target, 0.1, pad=-1, chunk_rows=2)
    want_loss, want_nll = label_smoothed_nll_loss(F.linear(hidden, weight), target, 0.1, pad=-1)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, want_loss, rtol=1e-6, atol=0)
    torch.testing.assert_close(nll, want_nll, rtol=1e-6, atol=0)


def test_chunked_loss_gradient_reaches_the_hidden_states_with_a_frozen_output_layer() -> None:
    gen = torch.Generator().manual_seed(3)
    hidden = torch.randn(6, 5, generator=gen)
    weight = torch.randn(7, 5, generator=gen)  # frozen: no requires_grad
    target = torch.tensor([1, 2, 3, 4, 5, 0])
    ref = hidden.clone().requires_grad_()
    label_smoothed_nll_loss(F.linear(ref, weight), target, 0.1, pad=0)[0].backward()
    got = hidden.clone().requires_grad_()
    output_layer_loss(got, weight, target, 0.1, pad=0, chunk_rows=4)[0].backward()
    assert got.grad is not None
    torch.testing.assert_close(got.grad, ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not onednn_available(), reason="no oneDNN")
@pytest.mark.parametrize("onednn", [False, True])
def test_chunked_loss_runs_on_onednn_only_when_asked(monkeypatch: pytest.MonkeyPatch, onednn: bool) -> None:
    calls: list[int] = []
    real = loss_module.onednn_matmul

    def counting(*args: object) -> torch.Tensor:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(loss_module, "onednn_matmul", counting)
    gen = torch.Generator().manual_seed(4)
    hidden = torch.randn(6, 5, generator=gen).requires_grad_()
    weight = torch.randn(7, 5, generator=gen).requires_grad_()
    target = torch.tensor([1, 2, 3, 4, 5, 0])
    kwargs = {"onednn": True} if onednn else {}  # the default is the plain torch.mm path
    output_layer_loss(hidden, weight, target, 0.1, pad=0, chunk_rows=4, **kwargs)[0].backward()
    # two chunks, each a forward product and a d hidden product on oneDNN
    assert len(calls) == (4 if onednn else 0)


# -- corpus metrics (pipeline_lib/evaluate/metrics.py) -------------------------------------------


def test_ter_hand_computed_and_directed() -> None:
    # one substitution over 4 reference words; 2 insertions needed vs 2 deletions over a 2-word reference
    assert ter(["a b x d"], ["a b c d"]) == {
        "score": 25.0,
        "num_edits": 1.0,
        "ref_length": 4.0,
        "signature": "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0",
    }
    assert ter(["a b"], ["a b c d"])["score"] == 50.0
    assert ter(["a b c d"], ["a b"])["score"] == 100.0


def test_chrf2_hand_computed_and_recall_weighted() -> None:
    # hyp "ab", ref "abcd": orders 1-2 have hypothesis n-grams; P = 1, R = (2/4 + 1/3) / 2 = 5/12,
    # chrF_2 = 5PR / (4P + R) = 2500/53. Swapped: P = 5/12, R = 1 -> 25/32. Recall weighs 4x.
    short = chrf2(["ab"], ["abcd"])
    assert short["score"] == pytest.approx(2500 / 53, rel=1e-12)
    assert chrf2(["abcd"], ["ab"])["score"] == pytest.approx(100 * 25 / 32, rel=1e-12)
    assert short["signature"] == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"


def test_bleu_details_length_ratio_and_signatures() -> None:
    short = tokenized_bleu(["a b c"], ["a b c d"])
    assert short["ratio"] == 0.75 and (short["sys_len"], short["ref_len"]) == (3, 4)
    assert tokenized_bleu([""], [""])["ratio"] == 0.0  # an empty reference side: no division by zero
    assert (
        sacre_bleu(["a b"], ["a b"])["signature"]
        == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    )


def test_tokenized_bleu_lowercase_and_compound_split_show_in_the_signature() -> None:
    plain = tokenized_bleu(["A B C D"], ["a b c d"])
    lower = tokenized_bleu(["A B C D"], ["a b c d"], lowercase=True)
    assert plain["score"] == 0.0 and lower["score"] == pytest.approx(100.0)
    assert "|case:mixed|" in plain["signature"] and "|compound-split:no|" in plain["signature"]
    split = tokenized_bleu(["a-b"], ["a-b"], compound_split=True, lowercase=True)
    assert "|case:lc|" in split["signature"] and "|compound-split:yes|" in split["signature"]


# -- BPE / SentencePiece application (pipeline_lib/data/subword.py) ------------------------------

# Hand-written subword-nmt codes: "l o" then "lo w</w>", so "low" is one unit. The vocabulary saw
# "lo@@" and "w" 5 times each, never "low": a threshold splits "low" back into units it saw.
CODES = "#version: 0.2\nl o\nlo w</w>\n"
VOCAB = "lo@@ 5\nw 5\nl@@ 9\no@@ 9\n"


@pytest.fixture
def bpe_model(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "codes").write_text(CODES, encoding="utf-8")
    (tmp_path / "vocab").write_text(VOCAB, encoding="utf-8")
    return tmp_path / "codes", tmp_path / "vocab"


@pytest.mark.parametrize(
    ("with_vocab", "threshold", "want"),
    [
        (False, 0, "low l@@ o"),
        (True, 0, "low l@@ o"),  # threshold 0: no filtering, even with a vocabulary file
        (False, 50, "low l@@ o"),  # no vocabulary file: nothing to filter with
        (True, 1, "lo@@ w l@@ o"),  # "low" was never seen
        (True, 6, "l@@ o@@ w l@@ o"),  # "lo@@" seen 5 < 6 times
    ],
)
def test_bpe_vocabulary_threshold_by_hand(bpe_model, with_vocab: bool, threshold: int, want: str) -> None:
    codes, vocab = bpe_model
    subword.init_segmenter("bpe", str(codes), str(vocab) if with_vocab else None, threshold)
    assert subword.segment_chunk(["low lo"]) == ((want + "\n").encode(), 1)


def test_segment_file_counts_every_chunk_and_defaults_to_no_threshold(bpe_model, tmp_path: Path) -> None:
    codes, vocab = bpe_model
    src = tmp_path / "in.txt"
    src.write_text("low\nlo\nlow lo\nslow\nl\n", encoding="utf-8")
    plain, with_vocab, no_vocab = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert subword.segment_file(src, plain, kind="bpe", model_path=codes, chunk_size=2) == 5
    assert subword.segment_file(src, with_vocab, kind="bpe", model_path=codes, vocab_path=vocab) == 5
    assert subword.segment_file(src, no_vocab, kind="bpe", model_path=codes, threshold=50) == 5
    assert plain.read_text(encoding="utf-8") == "low\nl@@ o\nlow l@@ o\ns@@ low\nl\n"
    assert with_vocab.read_bytes() == no_vocab.read_bytes() == plain.read_bytes()


def test_sentencepiece_segmenter_round_trips(tmp_path: Path) -> None:
    import sentencepiece as spm

    text = tmp_path / "train.txt"
    text.write_text("the lower newest widest lowest newer wider\n" * 50, encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(tmp_path / "m"), vocab_size=30, model_type="bpe", minloglevel=2
    )
    subword.init_segmenter("spm", str(tmp_path / "m.model"), None, 0)
    data, n = subword.segment_chunk(["the newest", "wider lower"])
    lines = data.decode("utf-8").splitlines()
    assert n == 2 and len(lines) == 2
    for line, original in zip(lines, ["the newest", "wider lower"], strict=True):
        pieces = line.split(" ")
        assert len(pieces) > 2  # segmented, space-separated pieces
        assert "".join(pieces).replace("\u2581", " ").strip() == original


# -- Admin profiling and profile files (pipeline_lib/model/admin.py) -----------------------------


def test_admin_profile_file_round_trips_every_field(tmp_path: Path) -> None:
    from test_model_admin import admin_config, profiled

    for profile in (profiled()[1], profiled(recursion="cumulative")[1], closed_form_profile(admin_config())):
        path = tmp_path / f"{profile.method}-{profile.recursion}.json"
        profile.save(path)
        # the exact bytes of json.dump(indent=2): a run's identity holds the file's sha256
        assert path.read_text(encoding="utf-8") == json.dumps(profile.to_json(), indent=2)
        assert set(json.loads(path.read_text(encoding="utf-8"))) == {
            "format", "method", "recursion", "model_config", "omegas", "variances", "residual_variances", "batch"
        }  # fmt: skip
        assert AdminProfile.load(path) == profile
    reference, cumulative = profiled()[1], profiled(recursion="cumulative")[1]
    assert (reference.method, reference.batch, reference.recursion) == (
        "profiled",
        {"sentences": 8},
        "reference",
    )
    assert len(reference.residual_variances["encoder"]) == 8
    assert cumulative.residual_variances == {}  # the cumulative recursion measures no residual stream
    closed = closed_form_profile(admin_config())
    assert (closed.method, closed.model_config, closed.recursion) == (
        "closed_form",
        admin_config().to_dict(),
        None,
    )


def test_admin_profile_files_written_before_the_recursion_key_read_as_cumulative(tmp_path: Path) -> None:
    from test_model_admin import admin_config, profiled

    for profile, want in ((profiled()[1], "cumulative"), (closed_form_profile(admin_config()), None)):
        data = profile.to_json()
        del data["recursion"], data["residual_variances"]
        path = tmp_path / f"old-{profile.method}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        loaded = AdminProfile.load(path)
        assert loaded.recursion == want and loaded.residual_variances == {}
    not_a_profile = tmp_path / "list.json"
    not_a_profile.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CheckpointError, match="is not an Admin profile"):
        AdminProfile.load(not_a_profile)


def test_cumulative_profiling_measures_the_branches_at_omega_one() -> None:
    """Var f_i as an independent forward pass of the same batch and dropout draws sees it, with every ω
    at 1 (the cumulative recursion keeps ω fixed while it measures)."""
    from test_model_admin import admin_config, loss_of, profiled, sample_batch

    seed = 5
    model, profile = profiled(seed, "cumulative")
    seen: dict[str, list[float]] = {"encoder": [], "decoder": []}
    handles = [
        connection.branch_output.register_forward_hook(
            lambda m, i, out, name=name: seen[name].append(out.detach().double().var(correction=0).item())
        )
        for name in seen
        for connection in getattr(model, name).connections()
    ]
    torch.manual_seed(seed)  # profiled() drew the model from the seed, then the dropout masks
    build_model(admin_config())
    model.train()
    loss_of(model, sample_batch(seed))
    for handle in handles:
        handle.remove()
    for name, variances in seen.items():
        assert profile.variances[name] == pytest.approx(variances, rel=1e-5), name


def test_resolve_profile_combinations(tmp_path: Path) -> None:
    from test_model_admin import admin_config

    plain = admin_config(residual="post_ln")
    assert resolve_profile(plain, None, False) is None
    for path, closed in (("p.json", False), (None, True)):
        with pytest.raises(CheckpointError, match="takes no profile"):
            resolve_profile(plain, path, closed)
    config = admin_config()
    assert resolve_profile(config, None, True) == closed_form_profile(config)
    with pytest.raises(CheckpointError, match="needs --admin-profile"):
        resolve_profile(config, None, False)
    good = tmp_path / "good.json"
    closed_form_profile(config).save(good)
    assert resolve_profile(config, str(good), False) == closed_form_profile(config)
    other = tmp_path / "other.json"
    closed_form_profile(admin_config(encoder_layers=6)).save(other)
    with pytest.raises(CheckpointError, match=f"^Admin profile {other} was taken for encoder_layers=6"):
        resolve_profile(config, str(other), False)
    with pytest.raises(CheckpointError, match="^profile was taken for encoder_layers=6"):
        apply_profile(build_model(config), AdminProfile.load(other))


# -- paired bootstrap and the pairwise matrix (pipeline_lib/evaluate/significance.py) ------------

REFS = ["the cat sat on the mat", "a dog ran", "it is raining today", "we like tea"] * 3
SYSTEMS = [
    ("a", ["the cat sat on a mat", "a dog ran", "it rains today", "we like tea"] * 3),
    ("b", ["cat sat mat", "dog", "raining", "tea"] * 3),
    ("c", ["the cat sat on the mat", "a dog runs", "it is raining", "we like coffee"] * 3),
]


def test_significance_settings_boundaries() -> None:
    validate(1, 1)  # one sample and seed 1 are valid
    with pytest.raises(ConfigError):
        validate(0, 1)
    with pytest.raises(ConfigError):
        validate(1, 0)


def test_paired_bootstrap_defaults_and_result_fields() -> None:
    out = paired_bootstrap(SYSTEMS[:2], REFS, n_samples=9)
    assert out["metric"] == "bleu"
    assert "|bs:9|seed:12345|" in out["signature"]  # the sample count and default seed reach sacrebleu
    assert [r["name"] for r in out["results"]] == ["a", "b"]
    assert all(set(r) == {"name", "score", "mean", "ci", "p_value"} for r in out["results"])
    assert isinstance(out["results"][0]["mean"], float) and out["results"][0]["p_value"] is None
    # sacrebleu's p = (hits + 1) / (samples + 1): with 9 samples a multiple of 0.1
    assert round(out["results"][1]["p_value"] * 10, 9).is_integer()


def test_sign_at_alpha_is_not_significant_and_follows_the_metric_direction() -> None:
    assert sign(30.0, 20.0, 0.05, "bleu", 0.05) == "="  # p < alpha is significant, p == alpha is not
    assert sign(30.0, 20.0, 0.04, "bleu", 0.05) == "+"
    assert sign(30.0, 20.0, 0.01, "ter", 0.05) == "-"  # TER: lower is better


def test_pairwise_matrix_rows_seed_first_row_and_progress() -> None:
    calls: list[tuple[int, int]] = []
    matrix = pairwise_matrix(
        SYSTEMS, REFS, n_samples=9, seed=7, progress=lambda done, total: calls.append((done, total))
    )
    assert calls == [(1, 2), (2, 2)]
    assert "|bs:9|seed:7|" in matrix["signature"]
    row_b = paired_bootstrap(SYSTEMS[1:], REFS, n_samples=9, seed=7)["results"]
    assert matrix["p_values"][1][2] == matrix["p_values"][2][1] == row_b[1]["p_value"]
    assert matrix["scores"] == [r["score"] for r in paired_bootstrap(SYSTEMS, REFS, n_samples=9)["results"]]
    first = paired_bootstrap(SYSTEMS, REFS, n_samples=9, seed=7)
    assert pairwise_matrix(SYSTEMS, REFS, n_samples=9, seed=7, first_row=first) == matrix
    default = pairwise_matrix(SYSTEMS[:2], REFS)
    assert default["metric"] == "bleu" and "|bs:1000|seed:12345|" in default["signature"]


def test_render_matrix_markdown_layout() -> None:
    pairwise = {
        "systems": ["base", "deep"],
        "metric": "bleu",
        "scores": [27.31, 28.46],
        "matrix": [["", "-"], ["+", ""]],
        "alpha": 0.05,
        "signature": "SIG",
    }
    assert render_matrix_markdown(pairwise) == (
        "| Model | BLEU | a | b |\n"
        "| :--- | :---: | :---: | :---: |\n"
        "| a:base | 27.3 |  | - |\n"
        "| b:deep | 28.5 | + |  |\n"
        "\n"
        "Cell (i, j): row i significantly better (+), worse (-) or not different (=) than column j, "
        "paired bootstrap p < 0.05; SIG\n"
    )
    assert render_matrix_markdown({**pairwise, "metric": "chrf"}).startswith("| Model | chrF2 | a | b |\n")
    assert render_matrix_markdown({**pairwise, "metric": "ter"}).startswith("| Model | TER | a | b |\n")


def test_metric_registry_entry_points_score_the_hypothesis_against_the_reference() -> None:
    hyps, refs = ["a b c d e"], ["a b c x e"]
    inputs = ScoreInputs(hyps=hyps, refs=refs, tokenized=(hyps, refs, {"hyp_tok": "h", "ref_tok": "r"}))
    assert score_sacre_bleu(inputs) == sacre_bleu(hyps, refs)
    assert score_ter(inputs) == ter(hyps, refs) and score_chrf2(inputs) == chrf2(hyps, refs)
    assert score_ter(ScoreInputs(hyps=["a b"], refs=["a b c d"]))["score"] == 50.0  # not swapped
    assert score_chrf2(ScoreInputs(hyps=["ab"], refs=["abcd"]))["score"] == pytest.approx(2500 / 53)
    assert score_tokenized_bleu(inputs) == {**tokenized_bleu(hyps, refs), "hyp_tok": "h", "ref_tok": "r"}
    with pytest.raises(ValueError, match="needs the tokenized pair"):
        score_tokenized_bleu(ScoreInputs(hyps=hyps, refs=refs))


def test_paired_tokenized_bleu_and_chrf_score_as_the_corpus_metrics() -> None:
    # "a,b" stays one token without 13a tokenization; a missing 4-gram gives 0 without smoothing
    refs = ["the cat , sat on the mat", "a,b is here now"]
    hyps = [
        ("base", ["the cat sat on mat", "a,b is here"]),
        ("other", ["the cat , sat", "a , b is here now"]),
    ]
    out = paired_bootstrap(hyps, refs, "tok_bleu", n_samples=5)
    for (_, system), result in zip(hyps, out["results"], strict=True):
        assert result["score"] == pytest.approx(tokenized_bleu(system, refs)["score"], abs=1e-9)
    assert out["results"][0]["score"] == 0.0  # no 4-gram match in "base", no smoothing
    chrf = paired_bootstrap(hyps, refs, "chrf", n_samples=5)
    for (_, system), result in zip(hyps, chrf["results"], strict=True):
        assert result["score"] == pytest.approx(chrf2(system, refs)["score"], abs=1e-9)


# -- decoding search (pipeline_lib/decode/search.py) ---------------------------------------------


def _search_model(max_positions: int = 1024) -> TransformerModel:
    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab_size=24, tgt_vocab_size=24, encoder_layers=1, decoder_layers=1, d_model=16,
        ffn_dim=32, heads=2, dropout=0.0, max_positions=max_positions,
    )  # fmt: skip
    return build_model(cfg).eval()


def _teacher_forced(
    model: TransformerModel, src: torch.Tensor, hyp: list[int], temperature: float
) -> list[float]:
    """Log-probs of hyp + </s> from one uncached forward pass over the tempered logits."""
    prev = torch.tensor([[BOS, *hyp]])
    with torch.no_grad():
        logits = model.decode(prev, model.encode(src[:1]))[0].float() / temperature
    lp = F.log_softmax(logits, dim=-1)
    return lp.gather(1, torch.tensor([*hyp, EOS]).unsqueeze(1)).squeeze(1).tolist()


@pytest.mark.parametrize("temperature", [0.5, 2.0])
@pytest.mark.parametrize(("beam", "use_cache"), [(1, True), (2, True), (2, False)])
def test_search_scores_tokens_with_the_tempered_distribution(
    temperature: float, beam: int, use_cache: bool
) -> None:
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    cfg = SearchConfig(beam=beam, temperature=temperature, max_len_b=5, use_cache=use_cache)
    hyp = generate(model, src, cfg)[0][0]
    rescored = _teacher_forced(model, src, hyp.tokens, temperature)
    assert hyp.positional_scores == pytest.approx(rescored, abs=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_negative_unkpen_makes_unk_win_by_that_margin(beam: int) -> None:
    # fairseq's --unkpen is subtracted from <unk>'s log-prob: -50 makes every token <unk>.
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    hyp = generate(model, src, SearchConfig(beam=beam, unkpen=-50.0, min_len=3, max_len_b=3))[0][0]
    assert hyp.tokens == [UNK, UNK, UNK]
    plain = _teacher_forced(model, src, hyp.tokens, 1.0)
    assert hyp.positional_scores[:3] == pytest.approx([lp + 50.0 for lp in plain[:3]], abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_output_length_is_capped_by_the_models_positions(beam: int) -> None:
    # max_len_b far beyond the model: the decoder input [bos] + tokens fills max_positions exactly.
    model = _search_model(max_positions=6)
    src = torch.tensor([[5, 9, EOS]])
    hyps = generate(model, src, SearchConfig(beam=beam, nbest=beam, min_len=50, max_len_b=50))[0]
    assert [len(h.tokens) for h in hyps] == [5] * beam


@pytest.mark.parametrize("beam", [1, 3])
def test_max_len_zero_gives_the_empty_hypothesis(beam: int) -> None:
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    hyp = generate(model, src, SearchConfig(beam=beam, max_len_b=0))[0][0]
    assert hyp.tokens == []
    assert hyp.positional_scores == pytest.approx(_teacher_forced(model, src, [], 1.0), abs=1e-5)


@pytest.mark.parametrize("beam", [1, 3])
def test_max_len_a_scales_with_each_source_length(beam: int) -> None:
    # min_len beyond the limit: every output is exactly floor(a * src_len + b), src_len counting </s>
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS, 0, 0, 0, 0, 0, 0], [5, 9, 7, 8, 6, 5, 9, 7, 8, EOS]])
    hyps = generate(model, src, SearchConfig(beam=beam, max_len_a=0.5, max_len_b=1, min_len=50))
    assert [len(h[0].tokens) for h in hyps] == [3, 6]
