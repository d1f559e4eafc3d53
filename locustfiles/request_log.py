"""``--save-requests``: every request's line appended to the results folder's
``requests.jsonl`` as it finishes.

Every load-generating process of a run (``--processes N``) appends to the same
file. The file is opened with ``O_APPEND`` and each line goes out in one
``write``, so lines from different processes never interleave on a local file
system. Lines are in order of completion per process, not globally sorted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

REQUESTS_FILE = "requests.jsonl"


class RequestLog:
    """Appends JSON lines to one file; opened on first use and again after close."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def write(self, line: dict[str, Any]) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # a worker on another host
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, orjson.dumps(line) + b"\n")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
