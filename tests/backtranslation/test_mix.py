"""The back-translation mix (pipeline_lib/backtranslation/mix.py): tags, upsampling, shards."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pipeline_lib.backtranslation import mix
from pipeline_lib.errors import InputError


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
