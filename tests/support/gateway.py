"""A stand-in Prometheus Pushgateway on 127.0.0.1: records each push, answers like the real one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from httpserving import serving


class Pushes:
    def __init__(self, url: str) -> None:
        self.url = url
        self.received: list[tuple[str, str, bytes]] = []
        self.status = 200


@contextmanager
def gateway() -> Iterator[Pushes]:
    """Serve until the block ends; ``Pushes.status`` sets the answer to each push."""
    pushes = Pushes("")

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            pushes.received.append((self.command, self.path, body))
            self.send_response(pushes.status)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as port:
        pushes.url = f"http://127.0.0.1:{port}"
        yield pushes
