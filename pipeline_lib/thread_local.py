"""A per-thread setting for the length of a block (threads share one model: --cpu-workers, --workers)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def thread_local_setting(local: threading.local, name: str, value: object) -> Iterator[None]:
    """``local.<name>`` is ``value`` inside the block, in this thread only; the previous value after."""
    previous = getattr(local, name, None)
    setattr(local, name, value)
    try:
        yield
    finally:
        setattr(local, name, previous)
