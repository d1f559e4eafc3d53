"""Where the tool itself came from, for the report's metadata."""

from __future__ import annotations

import functools
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


@functools.cache  # asked at every journal flush: once per process is enough
def tool_version() -> str:
    try:
        return version("slogate")
    except PackageNotFoundError:
        return "unknown"


@functools.cache  # a subprocess per journal flush would stall the event loop
def git_revision() -> str | None:
    """The checkout's commit, when slogate runs from a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None
