"""Language codes have a pattern, in the schema and in every stage CLI's flags: a code that is an
option (``-h``), a path or free text is refused by ``check-config`` with file:line, and by a stage
before it touches a file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_lib.cli import main
from pipeline_lib.errors import ConfigError
from pipeline_lib.lang_code import LANG_CODE_PATTERN, is_lang_code
from pipeline_lib.train.config import TrainConfig
from pipeline_lib.workflow.schema import SCHEMA_FILE, load_schema, validate_config

REPO = Path(__file__).resolve().parents[2]
BAD = ["-h", "en fr", "../x", "EN", "e", "en;id", ""]


def test_the_schema_holds_the_same_pattern():
    schema = yaml.safe_load((REPO / SCHEMA_FILE).read_text(encoding="utf-8"))
    assert schema["definitions"]["lang"]["pattern"] == LANG_CODE_PATTERN


def test_real_codes_pass():
    # the shipped configs', sacremoses' nonbreaking-prefix names, and subtagged ones
    for code in ["en", "fr", "de", "xx", "yue", "pt-br", "zh_Hant", "sr-Latn"]:
        assert is_lang_code(code), code
    for code in BAD:
        assert not is_lang_code(code), code


@pytest.mark.parametrize("side", ["src", "tgt"])
def test_check_config_refuses_a_code_that_is_an_option_with_file_and_line(tmp_path: Path, side: str):
    text = (REPO / "config.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "c.yaml"
    bad.write_text(re.sub(rf"(?m)^    {side}: \w+$", f'    {side}: "-h"', text, count=1), encoding="utf-8")
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if t == f'    {side}: "-h"')
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_lib", "check-config", str(bad)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode != 0
    assert proc.stderr.startswith(f"error: {bad}:{line}: config key 'datasets.bible_enfr.{side}'"), (
        proc.stderr
    )


@pytest.mark.parametrize("code", BAD[:-1])
def test_the_schema_refuses_bad_codes(code: str):
    cfg = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    cfg["datasets"]["bible_enfr"]["tgt"] = code
    with pytest.raises(ConfigError, match="config key 'datasets.bible_enfr.tgt'"):
        validate_config(cfg, load_schema(REPO / SCHEMA_FILE))


STAGE_FLAGS = [
    ("preprocess", ["--raw-dir", "r", "--out-dir", "o", "--tgt", "fr"], "--src"),
    ("learn-bpe", ["--tgt", "fr"], "--src"),
    ("apply-bpe", ["--src", "en"], "--tgt"),
    ("binarize", ["--in-dir", "i", "--out-dir", "o", "--src", "en"], "--tgt"),
    ("bt-mix", ["--tgt", "fr"], "--src"),
    ("profile", ["--source-lang", "en"], "--target-lang"),
    ("translate", [], "--source-lang"),
    ("score", [], "--lang"),
    ("score", [], "--moses-lang"),
]


@pytest.mark.parametrize(("stage", "others", "flag"), STAGE_FLAGS, ids=[f"{s}{f}" for s, _, f in STAGE_FLAGS])
def test_every_stage_flag_refuses_a_path_as_a_language(capsys, stage: str, others: list[str], flag: str):
    with pytest.raises(SystemExit) as info:
        main([stage, *others, f"{flag}=../x"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert re.search(rf"argument (-\w/)?{flag}(/-\w)?: '\.\./x' is not a language code", err), err


def test_train_config_refuses_a_bad_code():
    with pytest.raises(
        ConfigError, match=r"train.source_lang \(--source-lang\): 'e n' is not a language code"
    ):
        TrainConfig(data="d", save_dir="s", source_lang="e n", target_lang="fr")
