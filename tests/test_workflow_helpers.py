"""Workflow helpers in pipeline_lib: diverged placeholders and the back-translation mix."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pipeline_lib.backtranslation import mix
from pipeline_lib.divergence import placeholders as diverged
from pipeline_lib.errors import InputError
from pipeline_lib.report.inputs import read_train_log


def test_placeholders_only_for_diverged_runs(tmp_path: Path):
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"status": "completed", "update": 10}))
    assert not diverged.skip_diverged(status, score=tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()
    status.write_text(json.dumps({"status": "diverged", "update": 3, "epoch": 1, "reason": "nan"}))
    assert diverged.skip_diverged(
        status, checkpoint=tmp_path / "avg.pt", text=[tmp_path / "h.txt"], lines=4,
        score=tmp_path / "s.json", system="x",
    )  # fmt: skip
    assert (tmp_path / "h.txt").read_text() == "\n" * 4
    score = json.loads((tmp_path / "s.json").read_text())
    assert score["status"] == "diverged" and score["scores"] == {} and score["schema"] == "deepnmt-score/1"
    assert json.loads((tmp_path / "avg.pt").read_text())["status"] == "diverged"


def test_bad_status_names_the_file(tmp_path: Path):
    bad = tmp_path / "status.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"status.json:1"):
        diverged.is_diverged(bad)


def _bpe_dir(root: Path) -> Path:
    d = root / "bpe"
    d.mkdir()
    for split, n in (("train", 3), ("valid", 1), ("test", 1)):
        (d / f"{split}.en").write_text("".join(f"e{split}{i}\n" for i in range(n)))
        (d / f"{split}.fr").write_text("".join(f"f{split}{i}\n" for i in range(n)))
    (d / "codes").write_text("#version: 0.2\n")
    (d / "meta.json").write_text(json.dumps({"subword": "bpe", "model": "codes", "moses_tokenized": True}))
    return d


def _args(root: Path, **kw) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mix.add_arguments(parser)
    argv = ["--real-dir", str(root / "bpe"), "--synthetic-src", str(root / "syn"), "--mono-tgt", str(root / "mono"),
            "--out-dir", str(root / "out"), "--src", "en", "--tgt", "fr"]  # fmt: skip
    for k, v in kw.items():
        argv += [f"--{k}"] + ([] if v is True else [str(v)])
    return parser.parse_args(argv)


def test_mix_upsamples_tags_and_drops_empty(tmp_path: Path):
    _bpe_dir(tmp_path)
    (tmp_path / "syn").write_text("s1 s@@ x\n\ns3\n")
    (tmp_path / "mono").write_text("m1\nm2\nm3\n")
    assert mix.run(_args(tmp_path, **{"upsample-real": 2})) == 0
    out = tmp_path / "out"
    src = (out / "train.en").read_text().splitlines()
    tgt = (out / "train.fr").read_text().splitlines()
    assert src == ["etrain0", "etrain1", "etrain2"] * 2 + ["<BT> s1 s@@ x", "<BT> s3"]
    assert tgt == ["ftrain0", "ftrain1", "ftrain2"] * 2 + ["m1", "m3"]
    assert (out / "valid.fr").read_text() == "fvalid0\n" and (out / "codes").is_file()
    assert not (out / "test.fr").exists()  # test is binarized apart, from the real dataset's bpe-test/
    meta = json.loads((out / "meta.json").read_text())
    assert (
        meta["backtranslation"]["synthetic_pairs"] == 2
        and meta["backtranslation"]["synthetic_dropped_empty"] == 1
    )
    assert meta["subword"] == "bpe"


def test_mix_rejects_mismatched_lengths_without_writing(tmp_path: Path):
    _bpe_dir(tmp_path)
    (tmp_path / "syn").write_text("a\nb\n")
    (tmp_path / "mono").write_text("m1\n")
    with pytest.raises(InputError, match="syn:2: line-count mismatch"):
        mix.run(_args(tmp_path, **{"no-tag": True}))
    assert not (tmp_path / "out").exists()


def test_train_log_per_epoch_perplexity(tmp_path: Path):
    log = tmp_path / "train_log.jsonl"
    records = [
        {"kind": "start", "update": 0, "parameters": 1234},
        {"kind": "train", "epoch": 1, "update": 2, "nll_loss": 2.0, "tokens_per_update": 100},
        {"kind": "train", "epoch": 1, "update": 3, "nll_loss": 5.0, "tokens_per_update": 100},
        {"kind": "valid", "epoch": 1, "update": 3, "ppl": 9.5},
        {"kind": "train", "epoch": 2, "update": 4, "nll_loss": 1.0, "tokens_per_update": 50},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"kind": "tra')  # a cut last line
    out = read_train_log(log)
    assert out.parameters == 1234
    assert out.train_ppl[1] == pytest.approx(2 ** ((2.0 * 200 + 5.0 * 100) / 300))
    assert out.train_ppl[2] == pytest.approx(2.0)
    assert out.valid_ppl == {1: 9.5}
    # the interval records themselves, for curves over updates
    assert out.train_points == [(2, 4.0), (3, 32.0), (4, 2.0)]
    assert out.valid_points == [(3, 9.5)] and out.epoch_ends == {1: 3, 2: 4}


def test_learning_curves_plot_every_interval_record_over_updates(tmp_path: Path, monkeypatch):
    """An update-limited run (one epoch, many log intervals) is a curve, not one dot per epoch."""
    from pipeline_lib.report import learning_curves as curves

    log = tmp_path / "train_log.jsonl"
    records = [{"kind": "start", "update": 0, "parameters": 10}]
    records += [{"kind": "train", "epoch": 1, "update": u, "nll_loss": 8.0 - u / 10, "tokens_per_update": 100}
                for u in range(10, 160, 10)]  # fmt: skip
    records += [{"kind": "valid", "epoch": 1, "update": 150, "ppl": 40.0}]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"status": "completed", "update": 150, "epoch": 1}))
    info = {"train_log": str(log), "status": str(status), "score": "", "encoder_layers": 2, "decoder_layers": 2,
            "residual": "pre_ln", "width": "base", "d_model": 64}  # fmt: skip
    figures = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: figures.append(fig))
    curves.learning_curves({"experiments": {"run": info}}, str(tmp_path / "lc.png"))
    train_ax, valid_ax = figures[0].axes[:2]
    assert train_ax.get_xlabel() == "update" == valid_ax.get_xlabel()
    curve = train_ax.lines[0]
    assert list(curve.get_xdata()) == list(range(10, 160, 10))
    assert curve.get_ydata()[0] == pytest.approx(2**7.0)
    assert list(train_ax.lines[1].get_xdata()) == [150]  # the end of epoch 1, marked


def test_no_significance_marks_against_a_diverged_baseline(tmp_path: Path):
    from pipeline_lib.report.inputs import Run
    from pipeline_lib.report.tables import DAGGER, Significance, render_comparison

    sig_path = tmp_path / "sig.json"
    row = {"name": "b", "p_value": 0.001, "significant": True, "better": True}
    sig_path.write_text(json.dumps({"alpha": 0.05, "vs_baseline": {"bleu": {"systems": [row]}}}))
    info = {"encoder_layers": 6, "decoder_layers": 6, "residual": "admin"}
    score = {
        "scores": {"bleu": {"score": 1.0, "signature": "s"}, "tok_bleu": {"score": 1.2, "signature": "t"}}
    }
    trained = Run("b", info, {"status": "completed"}, score)
    comp = {"name": "c", "title": "T", "baseline": "a", "rows": ["a", "b"], "metrics": ["bleu"]}
    for base_status, expect_mark in (("completed", True), ("diverged", False)):
        base = Run("a", info, {"status": base_status}, score)
        text = "\n".join(render_comparison(comp, {"a": base, "b": trained}, Significance(str(sig_path))))
        assert (DAGGER in text) is expect_mark, text
        assert ("No significance marks" in text) is not expect_mark


def test_mix_streams_shards_in_order_and_checks_their_total(tmp_path: Path):
    _bpe_dir(tmp_path)
    (tmp_path / "mono").write_text("m1\nm2\nm3\n")
    (tmp_path / "s0").write_text("s1\n")
    (tmp_path / "s1").write_text("s2\ns3\n")
    parser = argparse.ArgumentParser()
    mix.add_arguments(parser)
    base = ["--real-dir", str(tmp_path / "bpe"), "--mono-tgt", str(tmp_path / "mono"), "--out-dir",
            str(tmp_path / "out"), "--src", "en", "--tgt", "fr", "--no-tag"]  # fmt: skip
    assert (
        mix.run(parser.parse_args([*base, "--synthetic-src", str(tmp_path / "s0"), str(tmp_path / "s1")]))
        == 0
    )
    assert (tmp_path / "out" / "train.en").read_text().splitlines()[3:] == ["s1", "s2", "s3"]
    assert (tmp_path / "out" / "train.fr").read_text().splitlines()[3:] == ["m1", "m2", "m3"]
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())["backtranslation"]
    assert meta["tag"] is None and meta["synthetic_src"] == [str(tmp_path / "s0"), str(tmp_path / "s1")]
    with pytest.raises(InputError, match=r"mono:3: line-count mismatch, the synthetic sources have 2 lines"):
        mix.run(parser.parse_args([*base, "--synthetic-src", str(tmp_path / "s1")]))
