"""The exact-schedule server files each request in its truth log once, however
the client leaves. A client gone between two writes of one instant makes the
later write fail: closing the connection files the request, and the end of its
stream must not file it again (the client tests' one-request exchanges saw two
entries for one request on a loaded machine)."""

from __future__ import annotations

import socket
import time

from slogate.exactengine.behaviour import Behaviour
from slogate.exactengine.server import ExactServer, _Connection, _Stream
from slogate.exactengine.truth import TruthEntry
from slogate.exactengine.writes import Write


def test_a_client_gone_before_the_last_write_leaves_one_entry():
    server = ExactServer(Behaviour())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname()[:2])
        sock, _ = listener.accept()
    conn = _Connection(server, sock)
    entry = TruthEntry(1, "/v1/chat/completions", time.perf_counter_ns())
    # a chunk, then the terminating chunk, due at the same instant
    plan = (Write(0, b"5\r\nhello\r\n", tokens=1), Write(0, b"", end="done"))
    conn.stream = _Stream(conn, entry, plan)
    client.close()  # gone: the chunk's write draws a reset, the terminator's fails
    assert conn.stream.advance(time.perf_counter_ns()) is None
    assert conn.closed
    assert server.log == [entry]
