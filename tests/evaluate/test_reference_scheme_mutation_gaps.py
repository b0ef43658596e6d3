"""Fast tests for the reference_scheme mutants the other tests let survive (make mutate MODULE=reference_scheme).

tests/evaluate/test_reference_scheme.py runs preprocess and score as subprocesses, which the mutation
tester does not see; these call the module in-process, with meta.json files written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_lib.data.moses import FAIRSEQ_TEST, TokConfig
from pipeline_lib.errors import ConfigError, InputError
from pipeline_lib.evaluate.reference_scheme import hypothesis_scheme, recorded_scheme, split_of

IWSLT = {"normalize": False, "remove_non_printing": False, "aggressive_dash_splits": False, "lowercase": True}


def _meta(tmp_path: Path, tokenization: dict) -> Path:
    path = tmp_path / "meta.json"
    path.write_text(json.dumps({"subword": "bpe", "tokenization": tokenization}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("path", "split"),
    [
        ("work/data/x/test.fr", "test"),
        ("valid.tok.de", "valid"),
        (Path("/a.b/test1.en"), "test1"),
        ("test", "test"),
    ],
)
def test_split_of_is_the_file_name_up_to_its_first_dot(path, split: str) -> None:
    assert split_of(path) == split


def test_recorded_scheme_reads_the_splits_record_with_defaults_for_missing_keys(tmp_path: Path) -> None:
    meta = _meta(tmp_path, {"test": IWSLT, "valid": {"lowercase": False}})
    # by hand: TokConfig's defaults are normalize, remove_non_printing, tokenize, -a, escape on; the rest off
    assert recorded_scheme(meta, "test") == TokConfig(
        normalize=False,
        remove_non_printing=False,
        tokenize=True,
        aggressive_dash_splits=False,
        escape=True,
        straighten_apostrophes=False,
        lowercase=True,
    )
    assert recorded_scheme(str(meta), "valid") == TokConfig(True, True, True, True, True, False, False)


def test_recorded_scheme_refuses_missing_invalid_unrecorded_and_unknown(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        recorded_scheme(tmp_path / "absent.json", "test")
    (tmp_path / "dir.json").mkdir()  # not a file
    with pytest.raises(InputError, match="not found"):
        recorded_scheme(tmp_path / "dir.json", "test")
    bad = tmp_path / "bad.json"
    bad.write_text('{"tokenization":\n  {"test": }\n}', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.json:2: invalid JSON"):
        recorded_scheme(bad, "test")
    with pytest.raises(InputError, match="no tokenization record for split 'test'"):
        recorded_scheme(_meta(tmp_path, {"valid": {}}), "test")
    no_record = tmp_path / "old.json"
    no_record.write_text(json.dumps({"subword": "bpe"}), encoding="utf-8")  # an older preprocess
    with pytest.raises(InputError, match="no tokenization record"):
        recorded_scheme(no_record, "test")
    with pytest.raises(InputError, match=r"unknown keys \['aggressive', 'zz'\]"):
        recorded_scheme(_meta(tmp_path, {"test": {"zz": 1, "aggressive": True, "lowercase": True}}), "test")


def test_hypothesis_scheme_follows_the_reference_or_the_test_branch(tmp_path: Path) -> None:
    # both sides tokenized here: fairseq's test branch (tokenizer.perl -a, apostrophes straightened)
    assert hypothesis_scheme(None, None) == TokConfig(
        normalize=False, remove_non_printing=False, straighten_apostrophes=True
    )
    assert hypothesis_scheme(None, str(tmp_path / "ignored.json")) is FAIRSEQ_TEST
    with pytest.raises(ConfigError, match="needs --ref-tok-meta"):
        hypothesis_scheme(str(tmp_path / "test.fr"), None)
    meta = _meta(tmp_path, {"test": IWSLT, "valid": {}})
    assert hypothesis_scheme(str(tmp_path / "test.fr"), str(meta)).lowercase is True
    assert hypothesis_scheme(str(tmp_path / "valid.fr"), str(meta)) == TokConfig()
