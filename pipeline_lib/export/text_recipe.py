"""What an export needs to translate raw text: ``text.json`` (the data's tokenization, subword model
and the decoding the workflow used) and, for CTranslate2, ``translate.py`` (pipeline_lib/export/ct2_translate.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_lib.atomic import copy_file, write_text
from pipeline_lib.data.raw_text import TextRecipe
from pipeline_lib.decode.search_config import SearchConfig

SCRIPT = Path(__file__).with_name("ct2_translate.py")


def write_text_recipe(
    recipe: TextRecipe, subword_file: str | None, search: SearchConfig, max_positions: int, out: Path
) -> Path:
    """``subword_file``: the subword model's name inside ``out`` (copied there by the export)."""
    record = recipe.to_json(subword_file)
    record["max_positions"] = max_positions
    record["decoding"] = {
        "beam": search.beam,
        "lenpen": search.lenpen,
        "max_len_a": search.max_len_a,
        "max_len_b": search.max_len_b,
        "min_len": search.min_len,
    }
    path = out / "text.json"
    write_text(path, json.dumps(record, indent=2) + "\n")
    return path


def write_translate_script(out: Path) -> Path:
    copy_file(SCRIPT, out / "translate.py")
    return out / "translate.py"
