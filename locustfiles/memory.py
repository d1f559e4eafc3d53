"""A load process hands back the memory its start-up freed.

Tokenizing the prompt corpus (``prepare_process``) allocates tens of megabytes
that are freed once the token boundaries are kept, but the C allocator keeps
freed pages in its arenas (the tokenizer thread's arena included) for reuse:
without handing them back, every worker's resident size carried about 25 MB
it no longer used for the whole run (docs/benchmarks-history.md, "memory of a 1,024-stream
run"). Nothing in the run allocates on that scale again, so they are returned.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``; None on a C library without one (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    return getattr(ctypes.CDLL(name), "malloc_trim", None)


def release_freed_memory() -> bool:
    """Return the allocator's free pages, in every arena, to the system.
    False where the C library offers no way to."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
