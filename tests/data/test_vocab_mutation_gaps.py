"""Fast tests for the vocab mutants the other tests let survive (make mutate MODULE=vocab).

Oracles: ids, files and checksums written out by hand from the format in pipeline_lib/data/vocab.py's
docstring; the checksum against coreutils' sha256sum on the saved file.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import torch

from pipeline_lib.data.vocab import Vocabulary
from pipeline_lib.errors import InputError


def test_specials_have_fixed_ids_and_are_never_ordinary_tokens() -> None:
    v = Vocabulary(["x", "y"], [7, 5])
    assert (v.pad, v.bos, v.eos, v.unk, v.nspecial, len(v)) == (0, 1, 2, 3, 4, 6)
    assert [v.token(i) for i in range(6)] == ["<pad>", "<s>", "</s>", "<unk>", "x", "y"]
    assert [v.count(i) for i in range(6)] == [0, 0, 0, 0, 7, 5]
    assert "x" in v and "<unk>" in v and "z" not in v
    assert Vocabulary(["x"]).count(4) == 0  # no counts given: 0 each
    # a counter's specials are dropped, not counted as ordinary tokens
    built = Vocabulary.build(Counter({"<unk>": 50, "</s>": 40, "<pad>": 30, "<s>": 20, "w": 1}))
    assert built.tokens == ["w"] and len(built) == 5


def test_unknown_tokens_map_to_unk_and_decoding_drops_only_pad_bos_eos() -> None:
    v = Vocabulary(["a", "b"])  # a = 4, b = 5
    assert v.index("b") == 5 and v.index("zz") == 3 and v.index("<s>") == 1
    assert v.encode(["b", "zz", "a", "</s>"]) == [5, 3, 4, 2]
    assert v.decode(torch.tensor([0, 1, 4, 3, 5, 2])) == ["a", "<unk>", "b"]
    assert v.decode([3]) == ["<unk>"] and v.decode([2, 1, 0]) == []
    assert v.string(torch.tensor([4, 3, 5, 2, 0])) == "a <unk> b"


def test_build_threshold_is_inclusive_and_nwords_zero_keeps_none() -> None:
    counts = Counter({"d": 2, "c": 3, "b": 3, "a": 1})
    # by hand: at threshold 2, d (2), b (3) and c (3) qualify; most frequent first, ties by the token
    v = Vocabulary.build(counts, threshold=2)
    assert v.tokens == ["b", "c", "d"] and [v.count(i) for i in (4, 5, 6)] == [3, 3, 2]
    assert Vocabulary.build(counts, threshold=3).tokens == ["b", "c"]
    assert Vocabulary.build(counts).tokens == ["b", "c", "d", "a"]  # default threshold 1: all
    assert Vocabulary.build(counts, nwords=0).tokens == []
    assert Vocabulary.build(counts, nwords=-1).tokens == ["b", "c", "d", "a"]
    assert Vocabulary.build(counts, threshold=2, nwords=1).tokens == ["b"]
    assert Vocabulary.build({"x": 4, "y": 9}).tokens == ["y", "x"]  # a plain dict of counts


def test_equality_and_hash_follow_the_token_list_not_the_counts() -> None:
    a, b = Vocabulary(["x", "y"], [1, 1]), Vocabulary(["x", "y"], [9, 3])
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != Vocabulary(["y", "x"]) and a != ["<pad>", "<s>", "</s>", "<unk>", "x", "y"]
    assert len({a, Vocabulary(["y", "x"]), Vocabulary(["x"])}) == 3


def test_constructor_refuses_bad_tokens_and_count_lists() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        Vocabulary(["a", "b"], [1])
    for bad in ("", "a b", "a\tb", "a\u00a0b"):
        with pytest.raises(ValueError, match="empty or contains whitespace"):
            Vocabulary([bad])
    for dup in (["a", "a"], ["<unk>"], ["<pad>"]):
        with pytest.raises(ValueError, match="duplicate or reserved"):
            Vocabulary(dup)


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="coreutils sha256sum not installed")
def test_saved_file_and_checksum_match_sha256sum(tmp_path: Path) -> None:
    v = Vocabulary(["ü", "b@@"], [12, 3])
    v.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_bytes() == "ü 12\nb@@ 3\n".encode()
    out = subprocess.run(
        ["sha256sum", str(tmp_path / "vocab.txt")], capture_output=True, text=True, check=True
    )
    assert v.sha256() == out.stdout.split()[0]


def test_load_reads_counts_and_refuses_what_is_not_a_vocab_file(tmp_path: Path) -> None:
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"z 5\ny -1\nx 0\n")
    v = Vocabulary.load(path)
    assert v.tokens == ["z", "y", "x"] and [v.count(i) for i in (4, 5, 6)] == [5, -1, 0]
    assert Vocabulary.load(str(path)) == v
    with pytest.raises(InputError, match="vocabulary file not found"):
        Vocabulary.load(tmp_path / "absent.txt")
    with pytest.raises(InputError, match="vocabulary file not found"):
        Vocabulary.load(tmp_path)  # a directory
    # one space between token and count, a count of digits with an optional minus, lines ending in \n only
    bad = [
        "a 1\nb 2 3\n",
        "a x\n",
        "a\n",
        "a 1.5\n",
        "a 1\r\n",
        "a\t1\n",
        "a 1 \n",
        "a 1X\n",
        "a X1\n",
        "a  1\n",
    ]
    for text in bad:
        lineno = text.count("\n")
        path.write_bytes(text.encode())
        with pytest.raises(InputError, match=rf"vocab\.txt:{lineno}: expected 'token count'"):
            Vocabulary.load(path)
    path.write_bytes(b"a 1\na 2\n")
    with pytest.raises(InputError, match=r"vocab\.txt: duplicate or reserved token 'a'"):
        Vocabulary.load(path)
