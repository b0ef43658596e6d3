"""The text of IWSLT's TED files, as fairseq's ``examples/translation/prepare-iwslt14.sh`` extracts it.

* ``train.tags.<pair>.<lang>``: one sentence per line with talk metadata in between; lines holding
  ``<url>``, ``<talkid>`` or ``<keywords>`` are dropped, and the ``<title>``/``<description>`` tags
  (not their text) are removed, so titles and descriptions stay as training sentences, as in the
  script's ``grep -v`` / ``sed`` chain.
* ``IWSLT14.TED*.<pair>.<lang>.xml``: the text of every ``<seg id="N">`` line, leading and trailing
  whitespace stripped, typographic apostrophes straightened (the script's ``sed "s/’/'/g"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pipeline_lib.data.textio import read_lines

_DROPPED = ("<url>", "<talkid>", "<keywords>")
_REMOVED_TAGS = re.compile(r"</?(?:title|description)>")
_SEG = re.compile(r'<seg id="[0-9]*">\s*(.*?)\s*</seg>\s*$')


def train_tag_lines(path: Path) -> Iterator[str]:
    for line in read_lines(path):
        if any(tag in line for tag in _DROPPED):
            continue
        yield _REMOVED_TAGS.sub("", line)


def xml_seg_lines(path: Path) -> Iterator[str]:
    for line in read_lines(path):
        if "<seg id" not in line:
            continue
        match = _SEG.search(line)
        text = match.group(1) if match else line.split(">", 1)[-1]
        yield text.replace("\u2019", "'")
