"""The tune's engine interface: an engine a tune starts once per treatment.

Settings reach an engine as strings (from ``--set name=v1,v2`` or a factors
YAML); each engine coerces and validates them and names the bad setting in a
ValueError *before* any engine starts. The tune calls ``check`` for every
treatment first, then per treatment: ``start``, warm-up, ``reset_caches``, the
measurements, ``stop``; a crash (``alive()`` False, or EngineStartFailed)
records the treatment as failed with its log tail and the tune goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol


class EngineStartFailed(RuntimeError):
    """The engine exited or did not serve within its deadline; ``log_tail`` holds its last lines."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(message)
        self.log_tail = log_tail


class RunningTreatment(Protocol):
    """One treatment's engine, started and serving."""

    url: str  # base URL, e.g. http://127.0.0.1:41234
    startup_s: float  # from the start command to the first ready answer

    def reset_caches(self) -> None:
        """Prefix/KV caches emptied (vLLM POST /reset_prefix_cache, llama.cpp
        slots erased, the simulated engine's own route)."""

    def peak_memory_bytes(self) -> int | None:
        """Peak RSS of the engine's processes (None: unknown)."""

    def alive(self) -> bool:
        """False once it crashed."""

    def log_tail(self) -> str: ...

    def stop(self) -> int | None:
        """Clean stop (SIGTERM, then kill after a grace); its exit code."""


class EngineUnderTune(Protocol):
    """An engine a tune starts once per treatment."""

    kind: str  # "simulated" | "llamacpp" | "vllm" | "template"

    def check(self, settings: Mapping[str, str]) -> None:
        """ValueError naming the setting."""

    def start(self, settings: Mapping[str, str], log_dir: Path) -> RunningTreatment:
        """Waits until it serves (deadline), raises EngineStartFailed."""

    def launch_command(self, settings: Mapping[str, str]) -> str:
        """The exact shell command a user runs to launch these settings (the recommendation)."""

    def defaults(self) -> Mapping[str, str]:
        """The engine's current settings for the known factors."""
