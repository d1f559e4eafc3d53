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
import sys
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from slogate.engines.child import Child, ChildStartError, start_child
from slogate.simengine.profiles import DEFAULT_PROFILE
from slogate.simengine.server import READY_PREFIX


@dataclass(frozen=True)
class Deployment:
    """Replicas behind a router (``slogate engine --replicas``): how many, the
    router's policy, and each named replica's faults."""

    replicas: int
    router: str = "round-robin"
    replica_faults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    disaggregated: tuple[int, int] | None = None  # prefill and decode workers, not replicas

    def arguments(self) -> list[str]:
        args = ["--router", self.router]
        if self.disaggregated is None:
            args += ["--replicas", str(self.replicas)]
        else:
            args += ["--disaggregated", "{}:{}".format(*self.disaggregated)]
        for name, faults in self.replica_faults.items():
            for key, value in faults.items():
                args += ["--replica-fault", f"{name}:{key}={value}"]
        return args


class EngineStartError(RuntimeError):
    """The child exited or did not report ready in time (its stderr attached)."""


class EngineProcess:
    """A running simulated engine; stop it with :meth:`stop` or ``with``."""

    def __init__(self, child: Child, url: str) -> None:
        self.child = child
        self.url = url

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.child.pid

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

    def replicas(self) -> dict[str, str]:
        """A deployment's replicas (``--replicas``): each one's name and URL."""
        listing = self.admin("GET", "/admin/replicas")
        return {r["name"]: r["url"] for r in listing["replicas"]}

    def stderr_text(self) -> str:
        return self.child.log_text()

    def stop(self, timeout: float = 5.0) -> int | None:
        """Close stdin (the child shuts down cleanly), then SIGTERM, then SIGKILL."""
        return self.child.stop(grace_s=timeout / 2)

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
    deployment: Deployment | None = None,
    **overrides: Any,
) -> list[str]:
    """The child's command line (settings passed as ``--set``/``--fault``)."""
    command = [sys.executable, "-m", "slogate.simengine", "--profile", str(profile)]
    command += ["--host", host, "--port", str(port), "--exit-with-stdin"]
    for key, value in overrides.items():
        command += ["--set", f"{key}={json.dumps(value)}"]
    for key, value in (faults or {}).items():
        command += ["--fault", f"{key}={value}"]
    if deployment is not None:
        command += deployment.arguments()
    return command


def start_engine(
    profile: str = DEFAULT_PROFILE,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Mapping[str, Any] | None = None,
    deployment: Deployment | None = None,
    ready_timeout: float = 60.0,
    **overrides: Any,
) -> EngineProcess:
    """Start ``python -m slogate.simengine`` and wait for its ready line.

    ``overrides`` are :func:`slogate.simengine.config.build_config` settings (e.g.
    ``speedup=4``, ``num_gpu_blocks=128``); ``faults`` are fault settings;
    ``deployment``: replicas behind a router, whose URL is the engine's."""
    command = engine_command(
        profile, host=host, port=port, faults=faults, deployment=deployment, **overrides
    )
    child = start_child(
        command,
        name="simulated engine",
        ready_prefix=READY_PREFIX,
        stdin_pipe=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = child.wait_ready_line(ready_timeout)
    except ChildStartError as error:
        code = child.stop(grace_s=2.5)
        raise EngineStartError(
            f"simulated engine did not start ({' '.join(command)}); exit code {code}; {error}"
        ) from None
    return EngineProcess(child, url)
