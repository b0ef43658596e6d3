"""``translate``/``export --decoding NAME``: the search flags of a workflow decoding entry (or of an
experiment's entry) fill every flag not given; a flag given wins; the rest keep fairseq's defaults.
The expected values are read from the shipped demo config, not from the code under test."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline_lib.cli import build_parser
from pipeline_lib.decode.decoding_entry import apply_decoding
from pipeline_lib.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "config.yaml"
CONFIG = yaml.safe_load(DEMO.read_text())


def _parse(stage: str, *flags: str):
    required = {
        "translate": ["--checkpoint", "c.pt", "--raw-input", "in.en", "--output", "-"],
        "export": ["--checkpoint", "c.pt", "--format", "ctranslate2", "--out", "x"],
    }[stage]
    args = build_parser(stage).parse_args([stage, *required, *flags])
    return args, apply_decoding(args)


def test_an_entry_fills_every_search_flag_it_sets_and_the_batch_size():
    entry = CONFIG["decoding"]["wide_tuned"]
    args, used = _parse("translate", "--decoding", "wide_tuned", "--configfile", str(DEMO))
    assert used == "wide_tuned"
    assert (args.beam, args.lenpen, args.max_len_a, args.max_len_b, args.max_tokens) == (
        entry["beam"], entry["lenpen"], entry["max_len_a"], entry["max_len_b"], entry["max_tokens"]
    )  # fmt: skip
    # what the entry leaves unset keeps translate's own defaults (fairseq's)
    assert (args.sampling, args.sampling_topk, args.temperature, args.seed) == (False, -1, 1.0, 1)


def test_an_experiment_name_takes_that_experiments_entry():
    wide = next(n for n, e in CONFIG["experiments"].items() if e.get("decoding") == "wide_tuned")
    args, used = _parse("translate", "--decoding", wide, "--configfile", str(DEMO))
    assert used == "wide_tuned" and args.lenpen == CONFIG["decoding"]["wide_tuned"]["lenpen"]
    # an experiment without its own decoding uses the evaluation's
    plain = next(n for n, e in CONFIG["experiments"].items() if "decoding" not in e)
    args, used = _parse("translate", "--decoding", plain, "--configfile", str(DEMO))
    assert used == CONFIG["evaluation"]["decoding"]
    assert args.lenpen == CONFIG["decoding"][used]["lenpen"]


def test_a_flag_given_on_the_command_line_wins_even_at_its_default_value():
    # --beam 5 is translate's default: only "given or not" may decide, never "equal to the default"
    args, _ = _parse("translate", "--decoding", "default", "--configfile", str(DEMO), "--beam", "5")
    assert args.beam == 5 and args.max_len_b == CONFIG["decoding"]["default"]["max_len_b"]


def test_sampling_entries_switch_sampling_on():
    entry = CONFIG["decoding"]["bt_sampling"]
    args, _ = _parse("translate", "--decoding", "bt_sampling", "--configfile", str(DEMO))
    assert (args.sampling, args.sampling_topk, args.beam) == (True, entry["sampling_topk"], entry["beam"])


def test_without_decoding_the_flags_keep_fairseqs_defaults():
    args, used = _parse("translate")
    assert used is None
    defaults = (args.beam, args.lenpen, args.max_len_a, args.max_len_b, args.max_tokens)
    assert defaults == (5, 1.0, 0.0, 200, 6000)


def test_export_takes_the_entry_and_refuses_one_it_cannot_record():
    args, _ = _parse("export", "--decoding", "wide_tuned", "--configfile", str(DEMO))
    assert (args.beam, args.lenpen) == (CONFIG["decoding"]["wide_tuned"]["beam"], 2.0)
    with pytest.raises(ConfigError, match=r"decoding\.bt_sampling sets sampling, sampling_topk"):
        _parse("export", "--decoding", "bt_sampling", "--configfile", str(DEMO))


def test_an_unknown_name_lists_the_entries(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"--decoding nope: neither a decoding entry \(default, wide_tuned"):
        _parse("translate", "--decoding", "nope", "--configfile", str(DEMO))


def test_a_name_that_is_both_an_entry_and_an_experiment_with_another_entry_is_refused(tmp_path: Path):
    clash = tmp_path / "clash.yaml"
    first = next(iter(CONFIG["experiments"]))
    clash.write_text(yaml.safe_dump({"decoding": {first: {"beam": 2}}}))
    with pytest.raises(ConfigError, match=rf"--decoding {first}: both a decoding entry and an experiment"):
        _parse("translate", "--decoding", first, "--configfile", str(DEMO), str(clash))


def test_a_config_error_names_its_file_and_line(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("decoding:\n  default: {beam: 0}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:2: config key 'decoding\.default\.beam'"):
        _parse("translate", "--decoding", "default", "--configfile", str(DEMO), str(bad))
