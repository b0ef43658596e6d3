"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/decode/search.py and
pipeline_lib/decode/outputs.py and pipeline_lib/decode/inputs.py: each pins a behaviour that no other fast test
checked, found by a mutant that passed every test. (The outputs and inputs tests are here because this file is already
in mutmut's test list.)"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.data.indexed import write_dataset
from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.inputs import (
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
from pipeline_lib.decode.outputs import OutputWriter, Postprocess, Rendered, render
from pipeline_lib.decode.search import BOS, EOS, PAD, UNK, Hypothesis, SearchConfig, generate
from pipeline_lib.errors import CheckpointError, ConfigError, InputError
from pipeline_lib.model import build_model
from pipeline_lib.model.config import ModelConfig
from pipeline_lib.model.transformer import TransformerModel

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


def test_top_1_sampling_takes_the_most_likely_token_at_every_step() -> None:
    # oracle: one uncached forward pass over the sampled prefix; pad and bos are never generated,
    # </s> not before min_len
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS]])
    cfg = SearchConfig(beam=1, sampling=True, sampling_topk=1, nbest=3, min_len=2, max_len_b=6)
    for hyp in generate(model, src, cfg, torch.Generator().manual_seed(3))[0]:
        prev = torch.tensor([[BOS, *hyp.tokens]])
        with torch.no_grad():
            lp = F.log_softmax(model.decode(prev, model.encode(src))[0].float(), dim=-1)
        lp[:, [PAD, BOS]] = float("-inf")
        lp[:2, EOS] = float("-inf")  # min_len 2
        steps = len(hyp.tokens) + 1
        at_limit = steps == 7  # max_len_b 6: the 7th position is </s>, forced
        expected = [*hyp.tokens, EOS]
        checked = steps - 1 if at_limit else steps
        assert lp.argmax(dim=-1).tolist()[:checked] == expected[:checked]


def test_top_k_of_zero_is_the_full_distribution() -> None:
    # --sampling-topk <= 0 samples from every token: 0 draws what the default (-1) draws
    model = _search_model()
    src = torch.tensor([[5, 9, 7, EOS], [6, 8, EOS, PAD]])

    def draw(topk: int) -> list[list[list[int]]]:
        cfg = SearchConfig(beam=1, sampling=True, sampling_topk=topk, nbest=4, max_len_b=6)
        return [
            [h.tokens for h in hyps] for hyps in generate(model, src, cfg, torch.Generator().manual_seed(5))
        ]

    full = draw(-1)
    assert draw(0) == full
    assert draw(1) != full  # and the draw does depend on topk


# -- translate outputs (pipeline_lib/decode/outputs.py) ------------------------------------------
# translate's tests wrote these files in subprocesses only, so mutmut linked no test to the module.
# Oracles: the formats written out by hand from the module's docstring (fairseq-generate's scores in
# base 2: x / ln 2, computed by hand to 4 decimals; JSONL in natural log), the subword joins undone and
# the Moses detokenization of English by hand.

OUT_VOCAB = Vocabulary(["the", "c@@", "at", ",", "&apos;s", "é@@", "té", "."])  # ids 4..11
NEG_INF = float("-inf")
OUT_HYPS = [
    [  # sentence 1: two hypotheses; logprob -2.0 over 5 tokens, -1.75 over 4 (</s> included)
        Hypothesis([4, 5, 6, 7], -0.4, [-0.25, -0.5, -1.0, -0.125, -0.125]),
        Hypothesis([9, 10, 11], -0.4375, [-1.0, -0.5, -0.25, 0.0]),
    ],
    [Hypothesis([4, 8], NEG_INF, [-0.5, NEG_INF, -0.5])],  # sentence 2: one, with a -inf step
]
OUT_SUBWORD = [["the c@@ at ,", "é@@ té ."], ["the &apos;s"]]
OUT_TEXT = [["the cat,", "été."], ["the's"]]  # "@@ " joined, then Moses-detokenized (en)


def test_postprocess_joins_subwords_and_detokenizes_only_with_a_language() -> None:
    lines = ["the c@@ at ,", "the &apos;s"]
    assert Postprocess("bpe", "en").apply(lines) == ["the cat,", "the's"]
    assert Postprocess("bpe", None).apply(lines) == ["the cat ,", "the &apos;s"]
    assert Postprocess("spm", None).apply(["▁the ▁c at ▁,"]) == ["the cat ,"]
    assert Postprocess("none", "en").apply(["a@@ b ,"]) == ["a@@ b,"]


def test_render_groups_the_text_by_sentence() -> None:
    rendered = render(OUT_HYPS, OUT_VOCAB, Postprocess("bpe", "en"))
    assert (rendered.subword, rendered.text) == (OUT_SUBWORD, OUT_TEXT)
    # n-best lists of 1, 2 and 1 hypotheses: the third starts at the fourth rendered line
    (a, b), (c,) = OUT_HYPS
    rendered = render([[c], [a, b], [a]], OUT_VOCAB, Postprocess("bpe", "en"))
    assert rendered.text == [["the's"], ["the cat,", "été."], ["the cat,"]]


def _all_outputs(tmp_path: Path) -> dict[str, str]:
    return {kind: str(tmp_path / f"out.{kind}") for kind in ("text", "subword", "generate", "jsonl")}


def _writer(paths: dict[str, str]) -> OutputWriter:
    return OutputWriter(output=paths["text"], output_subword=paths.get("subword"),
                        output_generate=paths.get("generate"), output_jsonl=paths.get("jsonl"))  # fmt: skip


def test_every_output_format_by_hand(tmp_path: Path) -> None:
    paths = _all_outputs(tmp_path)
    with _writer(paths) as writer:
        writer.write(
            OUT_HYPS, Rendered(OUT_SUBWORD, OUT_TEXT), ["s one", "s two"], ["r one", "r two"], first_id=3
        )
        assert not any(Path(p).exists() for p in paths.values())  # renamed into place on close
    read = {kind: Path(p).read_text(encoding="utf-8") for kind, p in paths.items()}
    assert read["text"] == "the cat,\nété.\nthe's\n"
    assert read["subword"] == "the c@@ at ,\né@@ té .\nthe &apos;s\n"
    assert read["generate"] == (
        "S-3\ts one\nT-3\tr one\n"
        "H-3\t-0.5771\tthe c@@ at ,\nD-3\t-0.5771\tthe cat,\nP-3\t-0.3607 -0.7213 -1.4427 -0.1803 -0.1803\n"
        "H-3\t-0.6312\té@@ té .\nD-3\t-0.6312\tété.\nP-3\t-1.4427 -0.7213 -0.3607 0.0000\n"
        "S-4\ts two\nT-4\tr two\n"
        "H-4\t-inf\tthe &apos;s\nD-4\t-inf\tthe's\nP-4\t-0.7213 -inf -0.7213\n"
    )
    jsonl = read["jsonl"]
    assert jsonl.endswith("}\n") and len(jsonl.splitlines()) == 2
    assert "été" in jsonl  # not \u00e9-escaped
    first, second = (json.loads(line) for line in jsonl.splitlines())
    assert first == {
        "id": 3,
        "source": "s one",
        "reference": "r one",
        "nbest": [
            {"tokens": "the c@@ at ,", "text": "the cat,", "score": -0.4, "logprob": -2.0, "length": 5,
             "positional_scores": [-0.25, -0.5, -1.0, -0.125, -0.125]},
            {"tokens": "é@@ té .", "text": "été.", "score": -0.4375, "logprob": -1.75, "length": 4,
             "positional_scores": [-1.0, -0.5, -0.25, 0.0]},
        ],
    }  # fmt: skip
    assert second == {
        "id": 4,
        "source": "s two",
        "reference": "r two",
        "nbest": [{"tokens": "the &apos;s", "text": "the's", "score": NEG_INF, "logprob": NEG_INF, "length": 3,
                   "positional_scores": [-0.5, NEG_INF, -0.5]}],
    }  # fmt: skip


def test_ids_count_from_zero_and_no_reference_means_no_t_line(tmp_path: Path) -> None:
    paths = _all_outputs(tmp_path)
    with _writer(paths) as writer:
        writer.write(OUT_HYPS[1:], Rendered(OUT_SUBWORD[1:], OUT_TEXT[1:]), ["s two"], None)
    generate = Path(paths["generate"]).read_text(encoding="utf-8")
    assert generate.startswith("S-0\ts two\nH-0\t-inf\t"), generate
    assert "T-" not in generate
    record = json.loads(Path(paths["jsonl"]).read_text(encoding="utf-8"))
    assert record["id"] == 0 and "reference" not in record


def test_only_the_requested_outputs_are_written_and_dash_is_stdout(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    with OutputWriter(output="-", output_subword="sub.txt") as writer:
        writer.write(OUT_HYPS, Rendered(OUT_SUBWORD, OUT_TEXT), ["s one", "s two"], None)
    assert capsys.readouterr().out == "the cat,\nété.\nthe's\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub.txt"]
    assert (tmp_path / "sub.txt").read_text(encoding="utf-8") == "the c@@ at ,\né@@ té .\nthe &apos;s\n"


def test_a_failed_run_writes_nothing_and_keeps_its_error(tmp_path: Path) -> None:
    paths = _all_outputs(tmp_path)
    with pytest.raises(RuntimeError, match="killed"), _writer(paths) as writer:
        writer.write(OUT_HYPS, Rendered(OUT_SUBWORD, OUT_TEXT), ["s one", "s two"], None)
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["generate", "jsonl"])
def test_an_nbest_list_and_its_rendering_must_have_the_same_length(tmp_path: Path, kind: str) -> None:
    paths = {"text": str(tmp_path / "out.text"), kind: str(tmp_path / f"out.{kind}")}
    short = Rendered(
        [OUT_SUBWORD[0][:1], OUT_SUBWORD[1]], [OUT_TEXT[0][:1], OUT_TEXT[1]]
    )  # 1 of 2 hypotheses
    with pytest.raises(ValueError, match="zip"), _writer(paths) as writer:
        writer.write(OUT_HYPS, short, ["s one", "s two"], None)


# -- translate inputs (pipeline_lib/decode/inputs.py) --------------------------------------------
# Most of the module ran only in translate subprocesses. Oracles: ids, counts, shard bounds and
# messages written out by hand; a binarized directory written by hand with write_dataset.

IN_VOCAB = Vocabulary(["a", "b@@", "c"])  # ids 4, 5, 6; anything else is <unk> (3)


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_encode_lines_counts_unknowns_and_tokens() -> None:
    src = encode_lines(["a b@@ c", "x c", ""], IN_VOCAB, 4, "in.txt")
    assert src.ids == [[4, 5, 6], [3, 6], []]
    assert (src.text, src.references, src.unk_tokens, src.tokens, src.origin) == (
        ["a b@@ c", "x c", ""], None, 1, 5, "in.txt",
    )  # fmt: skip


def test_a_source_must_leave_room_for_eos() -> None:
    assert encode_lines(["a x c"], IN_VOCAB, 4, "in.txt").tokens == 3  # 3 + </s> = 4 fits
    with pytest.raises(InputError) as err:
        encode_lines(["a", "a x c"], IN_VOCAB, 3, "in.txt")
    assert str(err.value) == "in.txt:2: source has 3 tokens + </s>; the model accepts at most 3"


def test_text_sources_from_a_file_and_from_stdin(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"a c\nx\n")
    src = read_text_sources(str(path), IN_VOCAB, 8)
    assert (src.ids, src.text, src.unk_tokens, src.tokens, src.origin) == (
        [[4, 6], [3]],
        ["a c", "x"],
        1,
        3,
        str(path),
    )
    assert read_raw_lines(str(path)) == ["a c", "x"]
    _stdin(monkeypatch, b"c a\n")
    src = read_text_sources("-", IN_VOCAB, 8)
    assert (src.ids, src.text, src.origin) == ([[6, 4]], ["c a"], "-")
    _stdin(monkeypatch, b"A b\n\xc3\xa9\n")
    assert read_raw_lines("-") == ["A b", "é"]
    for read in (lambda p: read_text_sources(p, IN_VOCAB, 8), read_raw_lines):
        _stdin(monkeypatch, b"a\nb\xff\n")
        with pytest.raises(InputError) as err:
            read("-")
        assert str(err.value) == "<stdin>:2: invalid UTF-8 (byte 0xff at column 2)"
        with pytest.raises(InputError) as err:
            read(str(tmp_path / "none.txt"))
        assert str(err.value) == f"{tmp_path}/none.txt: input file not found"


@pytest.mark.parametrize(("text", "shard"), [("0/4", (0, 4)), ("3/4", (3, 4)), ("0/1", (0, 1))])
def test_parse_shard(text: str, shard: tuple[int, int]) -> None:
    assert parse_shard(text) == shard


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("4/4", "4/4: need 0 <= K < N"),
        ("-1/4", "-1/4: need 0 <= K < N"),
        ("0/0", "0/0: need 0 <= K < N"),
        ("1", "expected K/N, e.g. 0/4; got '1'"),
        ("1/2/3", "expected K/N, e.g. 0/4; got '1/2/3'"),
        ("a/4", "expected K/N, e.g. 0/4; got 'a/4'"),
    ],
)
def test_parse_shard_refuses(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as err:
        parse_shard(text)
    assert str(err.value) == message


def test_shard_range_is_contiguous_and_near_equal() -> None:
    assert shard_range(10, None) == (0, 10)
    assert [shard_range(10, (k, 3)) for k in range(3)] == [(0, 3), (3, 6), (6, 10)]
    assert [shard_range(2, (k, 4)) for k in range(4)] == [(0, 0), (0, 1), (1, 1), (1, 2)]


LINES7 = ["a", "a c", "c", "x", "a a", "c c c", "a"]


def test_a_shard_is_read_in_chunks_numbered_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES7), encoding="utf-8")  # no final newline: still 7 lines
    n, chunks = iter_text_sources(str(path), IN_VOCAB, 8, (1, 2), chunk_lines=3)  # lines 4-7
    assert n == 4
    got = [(first, s.ids, s.text, s.unk_tokens, s.tokens, s.origin) for first, s in chunks]
    assert got == [
        (0, [[3], [4, 4], [6, 6, 6]], ["x", "a a", "c c c"], 1, 6, f"{path}:4-6"),
        (3, [[4]], ["a"], 0, 1, f"{path}:7-7"),
    ]
    n, chunks = iter_text_sources(str(path), IN_VOCAB, 8, None, chunk_lines=7)
    assert n == 7
    assert [(first, s.origin, len(s.ids)) for first, s in chunks] == [(0, f"{path}:1-7", 7)]
    _, chunks = iter_text_sources(str(path), IN_VOCAB, 8, None, chunk_lines=2)
    assert [(first, s.origin) for first, s in chunks] == [
        (0, f"{path}:1-2"), (2, f"{path}:3-4"), (4, f"{path}:5-6"), (6, f"{path}:7-7"),
    ]  # fmt: skip
    n, chunks = iter_text_sources(str(path), IN_VOCAB, 8, (0, 3), chunk_lines=1)  # lines 1-2
    assert n == 2 and [s.text for _, s in chunks] == [["a"], ["a c"]]


def test_every_line_of_the_shard_is_checked_before_the_first_chunk(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES7) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:  # line 6 has 3 tokens: raised before any chunk is read
        iter_text_sources(str(path), IN_VOCAB, 3, (1, 2), chunk_lines=1)
    assert str(err.value) == f"{path}:6: source has 3 tokens + </s>; the model accepts at most 3"
    n, _ = iter_text_sources(str(path), IN_VOCAB, 3, (0, 2), chunk_lines=1)  # lines 1-3 fit
    assert n == 3
    with pytest.raises(InputError) as err:
        iter_text_sources(str(tmp_path / "none.txt"), IN_VOCAB, 8, None, chunk_lines=1)
    assert str(err.value) == f"{tmp_path}/none.txt: input file not found"


def _bin_dir(tmp_path: Path, src: list[list[int]], tgt: list[list[int]] | None, meta: dict) -> Path:
    """A binarized directory by hand: vocab.txt, {test}.{xx,yy} datasets and meta.json."""
    out = tmp_path / "bin"
    out.mkdir()
    IN_VOCAB.save(out / "vocab.txt")
    write_dataset(out / "test.xx", src)
    if tgt is not None:
        write_dataset(out / "test.yy", tgt)
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return out


def test_resolve_data_finds_the_directory_and_checks_the_vocabulary(tmp_path: Path) -> None:
    out = _bin_dir(tmp_path, [[4]], None, {"splits": {"test": {"sentences": 1}}})
    sha = hashlib.sha256((out / "vocab.txt").read_bytes()).hexdigest()
    for meta, data_dir in (({"data": {"bin_dir": str(out)}, "vocab_sha256": sha}, None),
                           ({"data": {"bin_dir": str(tmp_path / "gone")}}, str(out))):  # fmt: skip
        info = resolve_data(meta, data_dir, "m.pt")
        assert (info.bin_dir, info.vocab, info.meta) == (
            out,
            IN_VOCAB,
            {"splits": {"test": {"sentences": 1}}},
        )
    with pytest.raises(ConfigError) as err:
        resolve_data({"data": {}}, None, "m.pt")
    assert str(err.value) == "--data-dir is needed: checkpoint m.pt does not record its data directory"
    with pytest.raises(ConfigError) as err:
        resolve_data({"data": {"bin_dir": str(tmp_path / "gone")}}, None, "m.pt")
    assert (
        str(err.value)
        == f"{tmp_path}/gone/vocab.txt: vocabulary not found (recorded in checkpoint m.pt; pass --data-dir)"
    )
    with pytest.raises(ConfigError) as err:
        resolve_data({}, str(tmp_path / "gone"), "m.pt")
    assert str(err.value) == f"{tmp_path}/gone/vocab.txt: vocabulary not found"
    with pytest.raises(CheckpointError) as err:
        resolve_data({"vocab_sha256": "0" * 64}, str(out), "m.pt")
    assert str(err.value) == (
        f"{out}/vocab.txt (sha256 {sha[:12]}…) is not the vocabulary checkpoint m.pt was trained with "
        "(sha256 000000000000…)"
    )


def test_binarized_sources_with_and_without_references(tmp_path: Path) -> None:
    out = _bin_dir(tmp_path, [[3, 6], [3, 5, 5]], [[6], [4, 4]], {"splits": {"test": {"pairs": 2}}})
    info = resolve_data({}, str(out), "m.pt")
    src = read_binarized_sources(info, "test", "xx", "yy", 4)
    assert (src.ids, src.text, src.references) == (
        [[3, 6], [3, 5, 5]],
        ["<unk> c", "<unk> b@@ b@@"],
        ["c", "a a"],
    )
    assert (src.unk_tokens, src.tokens, src.origin) == (2, 5, f"{out}/test.xx.*")
    assert read_binarized_sources(info, "test", "xx", None, 4).references is None
    assert read_binarized_sources(info, "test", "xx", "zz", 4).references is None  # no test.zz
    with pytest.raises(InputError) as err:
        read_binarized_sources(info, "test", "xx", "yy", 3)
    assert (
        str(err.value) == f"{out}/test.xx sentence 2: source has 3 tokens + </s>; the model accepts at most 3"
    )
    assert split_size(out, "test") == 2


def test_binarized_sources_refuse_a_target_of_another_length(tmp_path: Path) -> None:
    out = _bin_dir(tmp_path, [[4], [6]], [[6], [4], [4]], {"splits": {"test": {"sentences": 2}}})
    info = resolve_data({}, str(out), "m.pt")
    with pytest.raises(InputError) as err:
        read_binarized_sources(info, "test", "xx", "yy", 8)
    assert str(err.value) == f"{out}: split test has 2 xx but 3 yy lines"
    assert split_size(out, "test") == 2  # a monolingual split counts sentences
    with pytest.raises(InputError) as err:
        split_size(out, "dev")
    assert str(err.value) == f"{out}/meta.json: no split 'dev'"
    (out / "meta.json").write_text(json.dumps({"splits": {"test": {}}}), encoding="utf-8")
    assert split_size(out, "test") == 0  # no count recorded
    (out / "meta.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError) as err:
        split_size(out, "test")
    assert str(err.value) == f"{out}/meta.json: no split 'test'"
