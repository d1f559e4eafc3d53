"""Engines a tune restarts once per treatment, and the simulated engine as one.

The interface (:class:`EngineUnderTune`, :class:`RunningTreatment`,
:class:`EngineStartFailed`) is the one agreed for every engine a tune drives:
the simulated engine here, a command template (:mod:`slogate.engines.template`),
llama.cpp and vLLM. Settings arrive as the text the user wrote; each engine
coerces and validates them in :meth:`EngineUnderTune.check`, naming the bad
setting before any engine starts, so a typo never costs a treatment's start-up.
"""

from __future__ import annotations

import json
import shlex
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, Protocol

from slogate.engines.child import LOG_TAIL_LINES, group_peak_rss_bytes
from slogate.engines.simulated import EngineProcess, EngineStartError, start_engine
from slogate.simengine.config import PROFILE_KEYS, EngineConfig, build_config
from slogate.simengine.profiles import DEFAULT_PROFILE, Profile

HTTP_TIMEOUT_S = 10.0
# vLLM refuses a prefix-cache reset while requests hold blocks: retry this long.
RESET_ATTEMPTS = 20
RESET_WAIT_S = 0.5
# Settings a profile may leave unset, and the property holding what the engine uses then.
RESOLVED = {
    "max_num_seqs": "scheduler_max_num_seqs",
    "max_num_batched_tokens": "scheduler_max_num_batched_tokens",
    "max_model_len": "effective_max_model_len",
    "num_gpu_blocks": "kv_blocks",
}


class EngineStartFailed(RuntimeError):
    """The engine exited or did not serve within its deadline; ``log_tail`` holds its last lines."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(message)
        self.log_tail = log_tail


class RunningTreatment(Protocol):
    """One treatment's engine, started and serving."""

    url: str
    startup_s: float

    def reset_caches(self) -> None: ...

    def peak_memory_bytes(self) -> int | None: ...

    def alive(self) -> bool: ...

    def log_tail(self) -> str: ...

    def stop(self) -> int | None: ...


class EngineUnderTune(Protocol):
    """An engine a tune starts once per treatment."""

    kind: str

    def check(self, settings: Mapping[str, str]) -> None: ...

    def start(self, settings: Mapping[str, str], log_dir: Path) -> RunningTreatment: ...

    def launch_command(self, settings: Mapping[str, str]) -> str: ...

    def defaults(self) -> Mapping[str, str]: ...


class CacheResetFailed(RuntimeError):
    """The engine refused or failed to empty its caches."""


def post(url: str) -> bytes:
    """POST with an empty body; the answer's body, or CacheResetFailed saying why."""
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as error:
        body = error.read()[:300].decode("utf-8", "replace")
        raise CacheResetFailed(f"POST {url}: HTTP {error.code} {body}") from None
    except (urllib.error.URLError, OSError) as error:
        raise CacheResetFailed(f"POST {url}: {error}") from None


def reset_prefix_cache(
    url: str, attempts: int = RESET_ATTEMPTS, wait_s: float = RESET_WAIT_S
) -> None:
    """vLLM's ``POST /reset_prefix_cache``. vLLM 0.32 answers ``{"success": false}``
    while blocks are still held (a warm-up request the stop cut off may still
    be finishing): ask again after ``wait_s``, and after ``attempts`` refusals
    fail, since the treatment would measure a warm cache. An empty 200 is an
    earlier release's success."""
    for _ in range(attempts):
        body = post(url + "/reset_prefix_cache")
        try:
            answer = json.loads(body) if body.strip() else {"success": True}
        except ValueError:
            raise CacheResetFailed(
                f"POST {url}/reset_prefix_cache: not JSON: {body[:200]!r}"
            ) from None
        if not isinstance(answer, dict) or answer.get("success") is not False:
            return
        time.sleep(wait_s)
    raise CacheResetFailed(
        f"POST {url}/reset_prefix_cache: refused {attempts} times over "
        f"{attempts * wait_s:g} s (blocks still held by running requests)"
    )


def setting_text(value: Any) -> str:
    """A profile value as a user writes it: ``true``, not ``True``."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class RunningSimulated:
    """A simulated engine serving one treatment."""

    def __init__(self, engine: EngineProcess, startup_s: float) -> None:
        self.engine = engine
        self.url = engine.url
        self.startup_s = startup_s

    def reset_caches(self) -> None:
        reset_prefix_cache(self.url)

    def peak_memory_bytes(self) -> int | None:
        return group_peak_rss_bytes(self.engine.pid)

    def alive(self) -> bool:
        return self.engine.child.process.poll() is None

    def log_tail(self) -> str:
        return self.engine.child.log_tail()

    def stop(self) -> int | None:
        return self.engine.stop()


class SimulatedUnderTune:
    """The simulated engine: a treatment's settings are profile and engine
    overrides (``max_num_seqs``, ``max_num_batched_tokens``, ``tp``,
    ``enable_prefix_caching``, ``speculative_tokens``...), so its optimum is the
    engine model's and a test can derive it offline."""

    kind = "simulated"

    def __init__(self, profile: str = DEFAULT_PROFILE, speedup: float = 1.0) -> None:
        self.profile = profile
        self.speedup = speedup

    def config(self, settings: Mapping[str, str]) -> EngineConfig:
        """The engine's configuration under ``settings``; ValueError naming a bad one."""
        unknown = sorted(set(settings) - PROFILE_KEYS)
        if unknown:
            known = ", ".join(sorted(PROFILE_KEYS))
            raise ValueError(f"simulated engine: unknown setting {unknown[0]!r}; known: {known}")
        return build_config(self.profile, speedup=self.speedup, **settings)

    def check(self, settings: Mapping[str, str]) -> None:
        self.config(settings)

    def gpus(self, settings: Mapping[str, str]) -> int:
        """The GPUs the treatment's deployment rents: its tensor parallelism."""
        return self.config(settings).profile.tp

    def start(self, settings: Mapping[str, str], log_dir: Path) -> RunningTreatment:
        began = time.monotonic()
        try:
            overrides: dict[str, Any] = dict(settings)  # checked: profile keys only
            engine = start_engine(self.profile, speedup=self.speedup, **overrides)
        except EngineStartError as error:
            tail = "\n".join(str(error).splitlines()[-LOG_TAIL_LINES:])
            raise EngineStartFailed(str(error), tail) from None
        return RunningSimulated(engine, time.monotonic() - began)

    def launch_command(self, settings: Mapping[str, str]) -> str:
        command = ["slogate", "engine", "--profile", self.profile]
        if self.speedup != 1:
            command += ["--speedup", f"{self.speedup:g}"]
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
        return shlex.join(command)

    def defaults(self) -> Mapping[str, str]:
        """The profile's settings, those left to the engine as the scheduler resolves them."""
        profile = build_config(self.profile).profile
        names = {f.name for f in fields(Profile)} & PROFILE_KEYS
        values = {name: getattr(profile, name) for name in names}
        values |= {name: getattr(profile, field) for name, field in RESOLVED.items()}
        return {name: setting_text(values[name]) for name in sorted(values)}
