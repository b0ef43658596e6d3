"""Language codes: what a ``src``/``tgt`` (and every stage's language flag) may be.

A code becomes part of file names (``train.en``), a Moses language (sacremoses' nonbreaking prefixes
are named ``en``, ``fr``, ``de``, ``pt``, ``zh``, ...), a METEOR stemmer choice and a command-line
argument, so it is an ISO 639 code (two or three lower-case letters) with optional subtags (``pt-br``,
``zh_Hant``), never free text: ``src: "-h"`` used to pass the config check and then break
preprocess's argument parsing. The workflow schema (``definitions.lang``) holds the same pattern; a
test keeps the two equal.
"""

from __future__ import annotations

import argparse
import re

LANG_CODE_PATTERN = r"^[a-z]{2,3}([-_][A-Za-z0-9]+)*$"
_LANG_CODE = re.compile(LANG_CODE_PATTERN)


def is_lang_code(text: str) -> bool:
    return _LANG_CODE.fullmatch(text) is not None


def lang_code(text: str) -> str:
    """argparse ``type=``: the code itself, or an error saying what a code looks like."""
    if not is_lang_code(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a language code (two or three lower-case letters with optional "
            "-subtags: en, fr, pt-br)"
        )
    return text
