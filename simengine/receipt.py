"""Where a request's TTFT starts: the instant its first bytes are read.

aiohttp hands a request to its handler after parsing it and after a turn or
two of the event loop, which it shares with the engine's steps; with dozens
of streams that is a millisecond or more after the bytes were read. A client
times TTFT from its send, so the engine's clock must start where the bytes
arrive: :class:`ReceiptHandler`, the connection's protocol, reads the
monotonic clock when the first bytes of a request come in, and the request's
handler takes it from there (:func:`receipt`).

aiohttp handles the requests of one connection one after another, so a
request's first bytes are the first read after the previous request's reply
was finished; the rest of a long body, read later, does not move the stamp.
A pipelined request, sent before the previous reply ended, has no stamp of
its own: its handler's start stands in.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web


class ReceiptHandler(web.RequestHandler):
    """aiohttp's HTTP/1.1 protocol, noting when each request's bytes arrive."""

    __slots__ = ("_armed", "receipt")

    def __init__(self, manager: web.Server, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._armed = True  # the next read starts a request
        self.receipt: float | None = None  # time.monotonic() of the current request's first read

    def data_received(self, data: bytes) -> None:
        if self._armed:
            self._armed = False
            self.receipt = time.monotonic()
        super().data_received(data)

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        """Every request, answered or failed, passes here once: the next read
        belongs to the next request."""
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self.receipt = None
            self._armed = True


def receipt(request: web.BaseRequest) -> float | None:
    """When ``request``'s first bytes were read (``time.monotonic()``); None
    when it was pipelined, or served by another protocol than ours."""
    protocol = request.protocol
    return protocol.receipt if isinstance(protocol, ReceiptHandler) else None


async def listen(runner: web.AppRunner, host: str, port: int) -> asyncio.Server:
    """Serve ``runner``'s application on ``host:port`` with :class:`ReceiptHandler`
    connections (in place of a ``web.TCPSite``, whose protocol is fixed); the
    caller closes the server before ``runner.cleanup()``."""
    manager = runner.server
    if manager is None:
        raise RuntimeError("the runner is not set up: call runner.setup() first")
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: ReceiptHandler(manager, loop=loop, access_log=None),
        host,
        port,
        backlog=4096,
        reuse_address=True,
    )
