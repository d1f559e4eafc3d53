"""Results files read whole, refused past a size: ``report``, ``compare`` and
``prune`` parse each file in one piece, and a 1 GB ``summary.json`` cost
``prune`` 3 GB and 12 s before it could say the file was not a summary. Each
bound is far past what a run writes (docs/reliability.md, "Limits"). No
pydantic here: the load processes import the readers."""

from __future__ import annotations

from pathlib import Path

MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # a summary.json (a run's, a repeat set's, a study's)
MAX_DATA_BYTES = 256 * 1024 * 1024  # run.json, buckets.json, timelines.json


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of ``path``; ValueError naming it when it holds more than
    ``limit`` (checked before a byte is read)."""
    size = path.stat().st_size
    if size > limit:
        raise ValueError(f"{path}: {size:,} bytes, over the limit of {limit:,} for this file")
    return path.read_bytes()
