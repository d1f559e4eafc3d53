"""Start a simulated engine in a child process and get its URL.

For ``slogate run`` without ``--host`` and for tests: the child binds the
requested port (0: any free one) and reports the actual URL on a stdout line,
so there is no port race. The child also exits when its stdin closes, so it
cannot outlive the parent even if the parent is killed.

    with start_engine("llama-3.1-8b@h100", speedup=4) as engine:
        requests.post(engine.url + "/v1/chat/completions", ...)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from slogate.simengine.profiles import DEFAULT_PROFILE
from slogate.simengine.server import READY_PREFIX


class EngineStartError(RuntimeError):
    """The child exited or did not report ready in time (its stderr attached)."""


class EngineProcess:
    """A running simulated engine; stop it with :meth:`stop` or ``with``."""

    def __init__(
        self, process: subprocess.Popen[bytes], url: str, log: Any, reader: threading.Thread
    ) -> None:
        self.process = process
        self.url = url
        self._log = log
        self._reader = reader  # drains the child's stdout until EOF

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.process.pid

    def admin(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """Call an admin route (``/admin/faults``, ``/admin/stats``) and decode its JSON."""
        data = None if body is None else json.dumps(dict(body)).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def set_faults(self, **faults: float) -> dict[str, Any]:
        """Merge fault settings (``faults.Faults`` field names); returns them all."""
        return self.admin("POST", "/admin/faults", faults)

    def clear_faults(self) -> dict[str, Any]:
        return self.admin("DELETE", "/admin/faults")

    def stats(self, reset: bool = False) -> dict[str, Any]:
        return self.admin("GET", "/admin/stats" + ("?reset=1" if reset else ""))

    def stderr_text(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self, timeout: float = 5.0) -> int | None:
        """Close stdin (the child shuts down cleanly), then SIGTERM, then SIGKILL."""
        process = self.process
        if process.poll() is None:
            if process.stdin is not None and not process.stdin.closed:
                process.stdin.close()
            for signal_next in (process.terminate, process.kill):
                try:
                    process.wait(timeout / 2)
                    break
                except subprocess.TimeoutExpired:
                    signal_next()
            else:
                process.wait(timeout)
        self._reader.join(timeout)
        self._log.close()
        return process.returncode

    def __enter__(self) -> EngineProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def engine_command(
    profile: str = DEFAULT_PROFILE,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Mapping[str, Any] | None = None,
    **overrides: Any,
) -> list[str]:
    """The child's command line (settings passed as ``--set``/``--fault``)."""
    command = [sys.executable, "-m", "slogate.simengine", "--profile", str(profile)]
    command += ["--host", host, "--port", str(port), "--exit-with-stdin"]
    for key, value in overrides.items():
        command += ["--set", f"{key}={json.dumps(value)}"]
    for key, value in (faults or {}).items():
        command += ["--fault", f"{key}={value}"]
    return command


def start_engine(
    profile: str = DEFAULT_PROFILE,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Mapping[str, Any] | None = None,
    ready_timeout: float = 60.0,
    **overrides: Any,
) -> EngineProcess:
    """Start ``python -m slogate.simengine`` and wait for its ready line.

    ``overrides`` are :func:`slogate.simengine.config.build_config` settings (e.g.
    ``speedup=4``, ``num_gpu_blocks=128``); ``faults`` are fault settings."""
    command = engine_command(profile, host=host, port=port, faults=faults, **overrides)
    log = tempfile.TemporaryFile()  # noqa: SIM115 - EngineProcess owns and closes it
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    found: list[str] = []

    def read_ready() -> None:
        assert process.stdout is not None
        with process.stdout:
            for raw in process.stdout:  # keeps draining after the ready line
                line = raw.decode("utf-8", "replace").strip()
                if not found and line.startswith(READY_PREFIX):
                    found.append(line[len(READY_PREFIX) :])
                    ready.set()
        ready.set()

    ready = threading.Event()
    reader = threading.Thread(target=read_ready, name="simengine-stdout", daemon=True)
    reader.start()
    ready.wait(ready_timeout)
    engine = EngineProcess(process, found[0] if found else "", log, reader)
    if not found:
        stderr = engine.stderr_text()
        code = engine.stop()
        raise EngineStartError(
            f"simulated engine did not start ({' '.join(command)}); exit code {code}; "
            f"stderr: {stderr.strip()}"
        )
    return engine
