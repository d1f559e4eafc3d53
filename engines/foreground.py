"""Serving a started engine in the foreground, as `slogate engine --llama-cpp`
and `slogate engine --vllm` do: one way to wait, report and stop for both."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Protocol


class Server(Protocol):
    def start(self) -> str: ...

    def wait(self, timeout_s: float | None = None) -> int | None: ...

    def stop(self) -> int | None: ...

    def log_tail(self) -> str: ...


def serve_in_foreground(
    server: Server,
    prog: str,
    start_errors: tuple[type[Exception], ...],
    ready: Callable[[str], str],
) -> int:
    """Start ``server``, print ``ready(url)``, and serve until Ctrl-C or SIGTERM.

    Exit codes follow slogate's: 0 stopped cleanly, 3 the server failed to
    start (one of ``start_errors``) or died.
    """
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        try:
            url = server.start()
        except start_errors as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 3
        print(f"{ready(url)}; Ctrl-C to stop", flush=True)
        while not stop.is_set():
            code = server.wait(timeout_s=0.5)
            if code is not None:
                print(f"{prog}: the server exited with code {code}:\n{server.log_tail()}",
                      file=sys.stderr)  # fmt: skip
                return 3
        return 0
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
