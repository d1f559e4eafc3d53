"""A local engine that keeps every request body it got and streams one reply."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from httpserving import serving
from loadruns import ModelsHandler

REPLY = "engine reply"


class RecordingEngine(ModelsHandler):
    """Streams ``REPLY`` in two chunks and keeps each request body it got."""

    protocol_version = "HTTP/1.1"
    bodies: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = self.load_request()
        if body is None:
            return
        type(self).bodies.append(body)
        self.reply(("engine ", "reply"))


@contextmanager
def recording_engine() -> Iterator[tuple[http.server.ThreadingHTTPServer, list[dict]]]:
    RecordingEngine.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingEngine)
    with serving(server):
        yield server, RecordingEngine.bodies
