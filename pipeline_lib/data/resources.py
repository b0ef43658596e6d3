"""Where downloaded inputs (the demo's wheel, Ding's .deb) are cached: ``--resources``' default."""

from __future__ import annotations

import os
from pathlib import Path


def resources_dir() -> Path:
    return Path(os.environ.get("DEEPNMT_RESOURCES", "resources"))
