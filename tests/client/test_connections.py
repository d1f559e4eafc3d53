"""The connection pool's hot path as a burst of sends meets it: taking an idle
connection is a check with the kernel, never a turn of the event loop."""

from __future__ import annotations

import select
import socket

import gevent
import gevent.select
import pytest

from slogate.client.connections import Pool


def test_taking_an_idle_connection_never_yields_to_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checking that an idle keep-alive connection is still open must not let
    other greenlets run: in a burst, each send that yielded there waited for
    every other ready greenlet in turn (gevent's cooperative ``select.poll``
    yields even with a zero timeout; 0.1 to 0.8 ms a request was measured)."""
    # As in every load process (importing Locust patches the interpreter),
    # for this test only.
    monkeypatch.setattr(select, "poll", gevent.select.poll)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        pool = Pool("127.0.0.1", port, None, size=2, connect_s=5.0, kernel_timestamps=False)
        pool.open_ahead(1)
        ran: list[bool] = []
        gevent.spawn(ran.append, True)
        conn = pool.idle()
        assert conn is not None
        assert ran == [], "another greenlet ran while an idle connection was taken"
        gevent.sleep(0)
        assert ran == [True]
        conn.close()
