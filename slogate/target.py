"""The engine a command puts load on: the host the user named, checked before
any load is sent, or a simulated engine started for as long as the command needs.

Every command that sends load (run, sweep, experiment) goes through here, so a
bad ``--host`` or ``--profile`` gets the same message and exit code everywhere:
2 when the flags are wrong, 3 when the engine is down or not OpenAI-compatible.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.client.engine_info import EngineError, discover
from slogate.engines.simulated import EngineStartError, start_engine
from slogate.simengine.profiles import DEFAULT_PROFILE, ProfileError, load_profile

DISCOVER_TIMEOUT_S = 10.0


class TargetError(Exception):
    """The engine cannot be used; ``code`` is the exit code to end with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@contextlib.contextmanager
def target_engine(
    host: str | None, profile: str | None, api_key_env: str | None, speedup: float | None = None
) -> Iterator[str]:
    """The base URL to load: ``host`` once it answers ``/v1/models`` (asked with
    the key in the scenario's ``api_key_env``), or that of a simulated engine
    with ``profile``, stopped when the block ends."""
    if host:
        if profile:
            message = "--profile chooses the simulated engine; it has no effect with --host"
            raise TargetError(message, EXIT_CONFIG)
        try:
            discover(host, api_key_env, timeout=DISCOVER_TIMEOUT_S)
        except ValueError as error:
            raise TargetError(str(error), EXIT_CONFIG) from error
        except EngineError as error:
            raise TargetError(str(error), EXIT_INVALID) from error
        yield host
        return
    name = profile or DEFAULT_PROFILE
    try:
        load_profile(name)
    except ProfileError as error:
        raise TargetError(str(error), EXIT_CONFIG) from error
    overrides: dict[str, Any] = {} if speedup is None else {"speedup": speedup}
    try:
        engine = start_engine(name, **overrides)
    except EngineStartError as error:
        raise TargetError(str(error), EXIT_INVALID) from error
    with engine:
        yield engine.url
