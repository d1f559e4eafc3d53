"""Servers that misbehave on purpose: the catalogue the reliability tests and
``bench/bench_reliability.py`` point slogate at (docs/reliability.md).

Each is a raw socket server on 127.0.0.1 (threads, no framework: the faults are
below what a framework lets one write): ``GET /v1/models`` answers a model list
as any engine does, every other request gets the fault. Use it as a context
manager, or run ``python -m slogate.exactengine.misbehave KIND`` to serve one.

A fault that sends forever stops when the client goes away, so a server never
outlives the load it was given.
"""

from __future__ import annotations

import argparse
import itertools
import socket
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["FAULTS", "HOSTILE_NAMES", "MisbehavingServer"]

_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Connection: close\r\n\r\n"
)
_MODELS = b'{"object": "list", "data": [{"id": "m", "owned_by": "misbehave"}]}'
_BLOCK = 65536
_OUTPUT = b'data: {"choices": [{"index": 0, "delta": {"content": "tok "}}]}\n\n'
_HEAD_LIMIT = 1 << 20


def _send_forever(conn: socket.socket, block: bytes) -> None:
    while True:
        conn.sendall(block)


def keepalive_flood(conn: socket.socket, request: bytes) -> None:
    """Keep-alive comments as fast as the socket takes them, never an event."""
    conn.sendall(_SSE_HEAD)
    _send_forever(conn, b": keep-alive\n" * (_BLOCK // 13))


def data_flood(conn: socket.socket, request: bytes) -> None:
    """``data:`` lines forever, never the blank line that would end the event."""
    conn.sendall(_SSE_HEAD)
    _send_forever(conn, b"data: x\n" * (_BLOCK // 8))


def done_only(conn: socket.socket, request: bytes) -> None:
    """A proper stream with no output at all: only ``[DONE]``."""
    conn.sendall(_SSE_HEAD + b"data: [DONE]\n\n")


def huge_event(conn: socket.socket, request: bytes) -> None:
    """One event of 1 GB: a single data line, then its blank line."""
    conn.sendall(_SSE_HEAD + b"data: ")
    block = b"a" * (1 << 20)
    for _ in range(1024):
        conn.sendall(block)
    conn.sendall(b"\n\n")


def reset(conn: socket.socket, request: bytes) -> None:
    """The connection reset (RST) right after the request arrived."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def headers_only(conn: socket.socket, request: bytes) -> None:
    """200 and the SSE headers, then silence with the connection open."""
    conn.sendall(_SSE_HEAD)
    while conn.recv(_BLOCK):
        pass


def endless(conn: socket.socket, request: bytes) -> None:
    """Valid output events every 10 ms, forever: no finish, no ``[DONE]``."""
    conn.sendall(_SSE_HEAD)
    while True:
        conn.sendall(_OUTPUT)
        time.sleep(0.01)


def clock_jump(conn: socket.socket, request: bytes) -> None:
    """A short valid stream whose ``created`` stamps jump a day back and forth:
    a client that timed by the server's clock would report nonsense."""
    conn.sendall(_SSE_HEAD)
    now = int(time.time())
    for i in range(8):
        created = now + (86400 if i % 2 else -86400)
        content = b"tok " if i < 7 else b""
        finish = b"null" if i < 7 else b'"stop"'
        conn.sendall(
            b'data: {"created": %d, "choices": [{"index": 0, "delta": {"content": "%s"}, '
            b'"finish_reason": %s}], "usage": null}\n\n' % (created, content, finish)
        )
        time.sleep(0.005)
    conn.sendall(b"data: [DONE]\n\n")


def echo_auth(conn: socket.socket, request: bytes) -> None:
    """401 whose body echoes the Authorization header it received (as some
    gateways do): a key sent here shows up in the error."""
    auth = b""
    for line in request.split(b"\r\n"):
        if line.lower().startswith(b"authorization:"):
            auth = line.split(b":", 1)[1].strip()
    body = b'{"error": {"message": "invalid key %s"}}' % auth
    conn.sendall(
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )


def _valid_stream(conn: socket.socket, headers: bytes = b"", usage: bytes = b"") -> None:
    """A short proper stream (4 output chunks, a finish, ``[DONE]``), with
    extra header lines and the ``usage`` object of its last chunk."""
    conn.sendall(_SSE_HEAD.replace(b"\r\n\r\n", b"\r\n" + headers + b"\r\n", 1))
    for _ in range(4):
        conn.sendall(_OUTPUT)
    last = b'{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]%s}'
    conn.sendall(b"data: " + last % (b', "usage": ' + usage if usage else b"") + b"\n\n")
    conn.sendall(b"data: [DONE]\n\n")


def slow_loris(conn: socket.socket, request: bytes) -> None:
    """A reply's head sent one byte a second: every read gets a byte in time,
    so only a deadline over the whole answer ends the wait."""
    for byte in _SSE_HEAD:
        conn.sendall(bytes([byte]))
        time.sleep(1.0)


_replicas = itertools.count()


def new_replica(conn: socket.socket, request: bytes) -> None:
    """A proper stream whose ``x-served-by`` names a replica never named
    before: a router with unbounded names."""
    _valid_stream(conn, b"x-served-by: replica-%d-%s\r\n" % (next(_replicas), b"x" * 150))


def huge_usage(conn: socket.socket, request: bytes) -> None:
    """A proper stream whose usage holds counts of 2^62 (the prompt's and the
    cached part of it): no token count is that large."""
    big = 1 << 62
    usage = b'{"prompt_tokens": %d, "completion_tokens": 4, "prompt_tokens_details": ' % big
    _valid_stream(conn, usage=usage + b'{"cached_tokens": %d}}' % big)


HOSTILE_NAMES = (
    '=HYPERLINK("http://evil.example/x","click")',
    "répliqué-ü",
    "c1\x9b31mred",
)


def hostile_served_by(conn: socket.socket, request: bytes) -> None:
    """A proper stream whose ``x-served-by`` is hostile text, in turn: a
    spreadsheet formula, a UTF-8 name, a raw C1 control (a one-byte CSI)."""
    name = HOSTILE_NAMES[next(_replicas) % len(HOSTILE_NAMES)]
    _valid_stream(conn, b"x-served-by: " + name.encode() + b"\r\n")


FAULTS: dict[str, Callable[[socket.socket, bytes], None]] = {
    "keepalive-flood": keepalive_flood,
    "data-flood": data_flood,
    "done-only": done_only,
    "huge-event": huge_event,
    "reset": reset,
    "headers-only": headers_only,
    "endless": endless,
    "clock-jump": clock_jump,
    "echo-auth": echo_auth,
    "slow-loris": slow_loris,
    "new-replica": new_replica,
    "huge-usage": huge_usage,
    "hostile-served-by": hostile_served_by,
}


def _read_request(conn: socket.socket) -> bytes:
    """The request's head and body (by Content-Length); b"" when the client left."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(_BLOCK)
        if not piece or len(data) > _HEAD_LIMIT:
            return b""
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(body) < length:
        piece = conn.recv(_BLOCK)
        if not piece:
            return b""
        body += piece
    return head + b"\r\n\r\n" + body


class MisbehavingServer:
    """Serves fault ``kind`` on 127.0.0.1 from a thread until closed. ``served``
    counts the POST requests (completions) that got the fault; ``auth_seen``
    keeps every Authorization header received (models list included)."""

    def __init__(self, kind: str, port: int = 0, models_fault: bool = False) -> None:
        if kind not in FAULTS:
            raise ValueError(f"fault {kind!r}: expected one of {sorted(FAULTS)}")
        self.fault = FAULTS[kind]
        self.models_fault = models_fault
        self.served = 0
        self.auth_seen: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", port), backlog=256)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> MisbehavingServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                request = _read_request(conn)
                if not request:
                    return
                for line in request.split(b"\r\n"):
                    if line.lower().startswith(b"authorization:"):
                        self.auth_seen.append(line.split(b":", 1)[1].strip())
                if request.startswith(b"GET /v1/models") and not self.models_fault:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(_MODELS), _MODELS)
                    )
                    return
                if request.startswith(b"POST"):  # a completion; not a /metrics scrape
                    self.served += 1
                self.fault(conn, request)
        except OSError:
            return  # the client went away: the fault is over


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slogate.exactengine.misbehave")
    parser.add_argument("kind", choices=sorted(FAULTS))
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    with MisbehavingServer(args.kind, args.port) as server:
        print(f"serving fault {args.kind} at {server.url}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
