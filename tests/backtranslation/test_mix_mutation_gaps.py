"""Fast tests for the mix mutants the other tests let survive (make mutate MODULE=mix).

Oracles: the output files and meta.json fields written out by hand for tiny inputs.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pytest

from pipeline_lib.backtranslation import mix
from pipeline_lib.errors import ConfigError, InputError


def _real(root: Path, model: str | None = "codes") -> Path:
    d = root / "bpe"
    d.mkdir()
    (d / "train.en").write_text("e0\ne1\n")
    (d / "train.fr").write_text("f0\nf1\n")
    (d / "valid.en").write_text("ev\n")
    (d / "valid.fr").write_text("fv\n")
    meta = {"subword": "bpe"} | ({"model": model} if model else {})
    if model:
        (d / model).write_text("#version: 0.2\n")
    (d / "meta.json").write_text(json.dumps(meta))
    return d


def _parse(root: Path, *extra: str, syn: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mix.add_arguments(parser)
    argv = ["--real-dir", str(root / "bpe"), "--mono-tgt", str(root / "mono"), "--out-dir", str(root / "out"),
            "--src", "en", "--tgt", "fr", "--synthetic-src", *(syn or [str(root / "syn")])]  # fmt: skip
    return parser.parse_args([*argv, *extra])


def test_defaults_are_one_copy_of_the_real_data_and_the_bt_tag(tmp_path: Path) -> None:
    _real(tmp_path)
    (tmp_path / "syn").write_text("  s1  \n")
    (tmp_path / "mono").write_text(" m1 \n")
    args = _parse(tmp_path)
    assert (args.upsample_real, args.tagged, args.tag) == (1, True, "<BT>")
    assert mix.run(args) == 0
    out = tmp_path / "out"
    assert (out / "train.en").read_text() == "e0\ne1\n<BT> s1\n"  # stripped, one space after the tag
    assert (out / "train.fr").read_text() == "f0\nf1\nm1\n"
    assert (out / "valid.en").read_text() == "ev\n" and (out / "codes").read_text() == "#version: 0.2\n"
    meta = json.loads((out / "meta.json").read_text())
    assert meta == {
        "subword": "bpe",
        "model": "codes",
        "backtranslation": {
            "real_dir": str(tmp_path / "bpe"),
            "real_pairs": 2,
            "upsample_real": 1,
            "synthetic_pairs": 1,
            "synthetic_dropped_empty": 0,
            "tag": "<BT>",
            "synthetic_src": [str(tmp_path / "syn")],
            "mono_tgt": str(tmp_path / "mono"),
        },
    }
    assert (out / "meta.json").read_text().endswith("}\n")


def test_an_own_tag_and_a_pair_with_an_empty_target_is_dropped(tmp_path: Path, caplog) -> None:
    _real(tmp_path, model=None)
    (tmp_path / "syn").write_text("s1\ns2\n \n")
    (tmp_path / "mono").write_text("m1\n\t\nm3\n")
    with caplog.at_level(logging.INFO, logger="pipeline_lib.backtranslation.mix"):
        assert mix.run(_parse(tmp_path, "--tag", "<T>", "--upsample-real", "3")) == 0
    out = tmp_path / "out"
    assert (out / "train.en").read_text() == "e0\ne1\n" * 3 + "<T> s1\n"
    assert (out / "train.fr").read_text() == "f0\nf1\n" * 3 + "m1\n"
    assert sorted(p.name for p in out.iterdir()) == [
        "meta.json",
        "train.en",
        "train.fr",
        "valid.en",
        "valid.fr",
    ]
    bt = json.loads((out / "meta.json").read_text())["backtranslation"]
    assert (bt["tag"], bt["upsample_real"], bt["synthetic_pairs"], bt["synthetic_dropped_empty"]) == (
        "<T>",
        3,
        1,
        2,
    )
    messages = [r.getMessage() for r in caplog.records]
    assert f"mix: 2 real pairs x3 + 1 synthetic (2 empty dropped) -> {out}" in messages
    assert "no synthetic pairs" not in caplog.text


def test_no_synthetic_pair_left_is_a_warning(tmp_path: Path, caplog) -> None:
    _real(tmp_path)
    (tmp_path / "syn").write_text("\n")
    (tmp_path / "mono").write_text("m\n")
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.backtranslation.mix"):
        assert mix.run(_parse(tmp_path, "--no-tag")) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["no synthetic pairs: the forward model trains on real data only"]
    assert (tmp_path / "out" / "train.en").read_text() == "e0\ne1\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--upsample-real", "0"], "--upsample-real must be >= 1, got 0"),
        (["--tag", ""], "--tag must be one non-empty token"),
        (["--tag", "<B T>"], "--tag must be one non-empty token"),
    ],
)
def test_settings_that_cannot_mix_are_refused(tmp_path: Path, extra: list[str], message: str) -> None:
    _real(tmp_path)
    (tmp_path / "syn").write_text("s\n")
    (tmp_path / "mono").write_text("m\n")
    with pytest.raises(ConfigError, match=message):
        mix.run(_parse(tmp_path, *extra))
    # a tag is not checked when none is written
    assert mix.run(_parse(tmp_path, "--no-tag", "--tag", "")) == 0


@pytest.mark.parametrize("missing", ["bpe/train.fr", "bpe/valid.en", "bpe/meta.json", "syn", "mono"])
def test_every_input_must_exist(tmp_path: Path, missing: str) -> None:
    _real(tmp_path)
    (tmp_path / "syn").write_text("s\n")
    (tmp_path / "mono").write_text("m\n")
    (tmp_path / missing).unlink()
    with pytest.raises(InputError, match=f"{tmp_path / missing}: not found"):
        mix.run(_parse(tmp_path))


@pytest.mark.parametrize(
    "option", ["--real-dir", "--synthetic-src", "--mono-tgt", "--out-dir", "--src", "--tgt"]
)
def test_every_path_and_language_is_a_required_option(tmp_path: Path, option: str, capsys) -> None:
    parser = argparse.ArgumentParser()
    mix.add_arguments(parser)
    argv = {"--real-dir": ["r"], "--synthetic-src": ["s0", "s1"], "--mono-tgt": ["m"], "--out-dir": ["o"],
            "--src": ["en"], "--tgt": ["fr"]}  # fmt: skip
    full = [x for k, v in argv.items() for x in [k, *v]]
    args = parser.parse_args(full)
    assert (args.real_dir, args.synthetic_src, args.mono_tgt) == (
        Path("r"),
        [Path("s0"), Path("s1")],
        Path("m"),
    )
    with pytest.raises(SystemExit):
        parser.parse_args([x for k, v in argv.items() if k != option for x in [k, *v]])
    assert f"the following arguments are required: {option}" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--src", "--tgt"])
def test_languages_are_checked_as_codes(option: str, capsys) -> None:
    parser = argparse.ArgumentParser()
    mix.add_arguments(parser)
    base = {
        "--real-dir": "r",
        "--synthetic-src": "s",
        "--mono-tgt": "m",
        "--out-dir": "o",
        "--src": "en",
        "--tgt": "fr",
    }
    with pytest.raises(SystemExit):
        parser.parse_args([x for k, v in {**base, option: "English"}.items() for x in (k, v)])
    assert "'English' is not a language code" in capsys.readouterr().err


def test_a_mismatch_names_the_shard_and_line_past_the_monolingual_end(tmp_path: Path) -> None:
    _real(tmp_path)
    (tmp_path / "a").write_text("1\n2\n")
    (tmp_path / "b").write_text("3\n4\n5\n")
    (tmp_path / "mono").write_text("m\nm\nm\n")
    # line 4 of the mix is b's second line
    with pytest.raises(InputError, match=r"b:2: line-count mismatch, the synthetic sources have 5 lines"):
        mix.run(_parse(tmp_path, syn=[str(tmp_path / "a"), str(tmp_path / "b")]))
    # the monolingual file ends exactly where a shard ends: the next shard's first line is the extra one
    (tmp_path / "mono").write_text("m\nm\n")
    with pytest.raises(InputError, match=r"b:1: line-count mismatch"):
        mix.run(_parse(tmp_path, syn=[str(tmp_path / "a"), str(tmp_path / "b")]))
    # three shards of 1, 1 and 3 lines against 3: the third shard's second line
    (tmp_path / "c").write_text("1\n")
    (tmp_path / "mono").write_text("m\nm\nm\n")
    with pytest.raises(InputError, match=r"b:2: line-count mismatch, the synthetic sources have 5 lines"):
        mix.run(_parse(tmp_path, syn=[str(tmp_path / "c"), str(tmp_path / "c"), str(tmp_path / "b")]))
    (tmp_path / "mono").write_text("m\n" * 7)
    with pytest.raises(
        InputError, match=r"mono:6: line-count mismatch, the synthetic sources have 5 lines, "
    ):
        mix.run(_parse(tmp_path, syn=[str(tmp_path / "a"), str(tmp_path / "b")]))
