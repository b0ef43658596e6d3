"""Fast tests added for the surviving mutants of `make mutate` (docs/mutation.md) in pipeline_lib/decode/search.py and
pipeline_lib/decode/outputs.py: each pins a behaviour that no other fast test checked, found by a mutant that passed
every test. (outputs' tests are here because this file is already in mutmut's test list.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.decode.outputs import OutputWriter, Postprocess, Rendered, render
from pipeline_lib.decode.search import BOS, EOS, UNK, Hypothesis, SearchConfig, generate
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
