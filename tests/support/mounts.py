"""A command run in a mount namespace of its own: read-only or full file systems."""

from __future__ import annotations

import os
import subprocess


def in_own_mounts(
    setup: str, command: list[str], after: str = "", **env: str
) -> subprocess.CompletedProcess:
    """``command`` in a mount namespace of its own between the shell lines
    ``setup`` and ``after`` (which see the mounts; its output follows the
    command's): a read-only or full file system that holds for root too, where
    chmod does not (an unprivileged user gets root in a user namespace)."""
    unshare = ["unshare", "-m", *(["--map-root-user"] if os.geteuid() else [])]
    script = f'set -e\n{setup}\ncode=0\n"$@" || code=$?\n{after}\nexit $code'
    return subprocess.run(
        [*unshare, "sh", "-c", script, "sh", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
