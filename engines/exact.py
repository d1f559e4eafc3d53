"""Start the exact-schedule server in its own process, on a free port, and read
its truth log. For tests, the selftest and benchmarks."""

from __future__ import annotations

import json
import sys
import urllib.request
from typing import Any

from slogate.engines.child import Child, ChildStartError, start_child
from slogate.exactengine.truth import TruthEntry

READY_PREFIX = "exactengine listening on "


class ExactEngine:
    """A running ``python -m slogate.exactengine``. ``behaviour`` holds the default
    :class:`~slogate.exactengine.behaviour.Behaviour` fields; ``cpus`` pins the server
    to those cores (benchmarks keep it off the client's core)."""

    def __init__(
        self,
        behaviour: dict[str, Any] | None = None,
        *,
        model: str = "exact-model",
        tokenize: str = "vllm",
        api_key_env: str | None = None,
        cpus: set[int] | None = None,
        start_timeout_s: float = 20.0,
    ) -> None:
        self.behaviour = behaviour or {}
        self.model = model
        self.tokenize = tokenize
        self.api_key_env = api_key_env
        self.cpus = cpus
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self._child: Child | None = None

    def start(self) -> str:
        """Start the server; returns its base URL (``http://127.0.0.1:PORT``)."""
        command = [
            sys.executable, "-m", "slogate.exactengine", "--port", "0", "--model", self.model,
            "--tokenize", self.tokenize, "--behaviour", json.dumps(self.behaviour),
        ]  # fmt: skip
        if self.api_key_env:
            command += ["--api-key-env", self.api_key_env]
        self._child = start_child(
            command, name="exactengine", ready_prefix=READY_PREFIX, cpus=self.cpus
        )
        try:
            self.url = self._child.wait_ready_line(self.start_timeout_s).strip()
        except ChildStartError as error:
            self.stop()
            raise RuntimeError(f"exactengine did not start: {error}") from None
        return self.url

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    def truth(self) -> list[TruthEntry]:
        """The finished requests since the last call, in the order they ended."""
        with urllib.request.urlopen(self.url + "/_exact/log", timeout=60) as response:
            data = json.loads(response.read())
        return [TruthEntry.from_dict(entry) for entry in data["requests"]]

    def stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.stop(grace_s=10)

    def __enter__(self) -> ExactEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
