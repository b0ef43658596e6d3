"""A binarized split is checked at load against binarize's meta.json: a file overwritten in place
(same size) or extended is named before training, profiling or decoding read a wrong id."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from train_fixtures import train_args

from pipeline_lib.cli import main
from pipeline_lib.data.indexed import ParallelCorpus
from pipeline_lib.data.integrity import split_digest
from pipeline_lib.decode.inputs import read_binarized_sources, resolve_data
from pipeline_lib.errors import InputError

WORDS = [f"w{i}" for i in range(30)]


def binarized(tmp_path: Path) -> Path:
    rng = random.Random(0)
    text = tmp_path / "text"
    text.mkdir()
    for split, n in (("train", 80), ("valid", 12), ("test", 12)):
        src = [" ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for _ in range(n)]
        (text / f"{split}.xx").write_text("\n".join(src) + "\n", encoding="utf-8")
        (text / f"{split}.yy").write_text("\n".join(s[::-1] for s in src) + "\n", encoding="utf-8")
    out = tmp_path / "bin"
    assert main(["binarize", "--in-dir", str(text), "--out-dir", str(out), "--src", "xx", "--tgt", "yy"]) == 0
    return out


def overwrite_same_size(path: Path) -> None:
    """Every id in place replaced by another valid id: what a rerun with another vocabulary into the
    same directory, or a bad copy, leaves; same size, same header, loads fine."""
    ids = np.load(path)
    np.save(path, np.roll(ids, 1))


def test_binarize_records_sizes_and_digests_that_match(tmp_path: Path):
    out = binarized(tmp_path)
    meta = json.loads((out / "meta.json").read_text())
    for split in ("train", "valid", "test"):
        for lang in ("xx", "yy"):
            prefix = str(out / f"{split}.{lang}")
            assert meta["splits"][split][f"{lang}_sha256"] == split_digest(prefix)
            for suffix in (".ids.npy", ".offsets.npy"):
                assert meta["file_bytes"][f"{split}.{lang}{suffix}"] == Path(prefix + suffix).stat().st_size


def test_a_split_overwritten_in_place_is_named_when_loaded(tmp_path: Path):
    out = binarized(tmp_path)
    ParallelCorpus(out, "train", "xx", "yy")  # intact: loads
    before = (out / "train.yy.ids.npy").stat().st_size
    overwrite_same_size(out / "train.yy.ids.npy")
    assert (out / "train.yy.ids.npy").stat().st_size == before
    with pytest.raises(InputError, match=rf"{out}/train\.yy\.ids\.npy / \.offsets\.npy: content differs"):
        ParallelCorpus(out, "train", "xx", "yy")


def test_an_extended_file_is_named_by_its_size(tmp_path: Path):
    out = binarized(tmp_path)
    with open(out / "valid.xx.ids.npy", "ab") as f:
        f.write(b"\0" * 64)  # np.load ignores bytes past the header's shape: invisible without the check
    with pytest.raises(InputError, match=rf"{out}/valid\.xx\.ids\.npy: [\d,]+ bytes, but .* records [\d,]+"):
        ParallelCorpus(out, "valid", "xx", "yy")


def test_train_refuses_damaged_data_in_one_line(tmp_path: Path, capsys):
    out = binarized(tmp_path)
    overwrite_same_size(out / "train.xx.ids.npy")
    code = main(train_args(out, tmp_path / "run", "--max-update", "2"))
    err = capsys.readouterr().err
    assert code != 0
    assert "train.xx.ids.npy / .offsets.npy: content differs" in err, err[-2000:]
    assert not (tmp_path / "run" / "checkpoint_last.pt").exists()


def test_decoding_sources_are_checked_too(tmp_path: Path):
    out = binarized(tmp_path)
    info = resolve_data({}, str(out), "unused.pt")
    read_binarized_sources(info, "test", "xx", "yy", 1024)
    overwrite_same_size(out / "test.xx.ids.npy")
    with pytest.raises(InputError, match=r"test\.xx\.ids\.npy / \.offsets\.npy: content differs"):
        read_binarized_sources(info, "test", "xx", "yy", 1024)
