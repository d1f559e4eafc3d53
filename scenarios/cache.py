"""What slogate keeps between runs under the user's cache
(``$XDG_CACHE_HOME/slogate``, else ``~/.cache/slogate``): results of slow,
deterministic work keyed by a hash of everything they depend on, so an entry
never goes stale and a missing or unreadable one only costs the work again."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def cache_dir(kind: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "slogate" / kind


def key_of(*parts: bytes) -> str:
    """A hex key of the parts, in order (each part ends with a NUL, so parts never run together)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(part)
        digest.update(b"\0")
    return digest.hexdigest()


def store(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write atomically; a cache that cannot be written only costs the next load
    time, and leaves no half-written file behind."""
    temporary: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            temporary = Path(f.name)
            write(f)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
