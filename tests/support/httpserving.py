"""Plain ``http.server`` servers the tests start on 127.0.0.1, served from a thread."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# How often serve_forever looks for a stop: at its default (0.5 s) every stop
# waited half a second, about 4 s of every `make check`.
POLL_S = 0.02


@contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[int]:
    """Serve ``server`` from a daemon thread until the block ends; its port."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
