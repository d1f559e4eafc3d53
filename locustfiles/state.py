"""The process's current load context, set when a test starts.

Locust creates users by class, with no way to hand them arguments; the
plugin installs the context here at ``test_start`` and users fetch it.
"""

from __future__ import annotations

from slogate.locustfiles.context import LoadContext

_current: LoadContext | None = None


def install(context: LoadContext | None) -> None:
    global _current
    _current = context


def current_context() -> LoadContext:
    if _current is None:
        raise RuntimeError("slogate: no load context; the slogate plugin did not start this test")
    return _current


def current_or_none() -> LoadContext | None:
    return _current
