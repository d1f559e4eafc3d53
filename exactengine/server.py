"""The exact-schedule OpenAI-compatible SSE server: one thread, one epoll loop.

Precision is the point, so nothing stands between the schedule and the socket:
every stream's writes wait in one heap, a ``timerfd`` armed at the earliest due
instant wakes the loop (nanosecond resolution, where epoll's own timeout would
round to the millisecond), and each due write goes straight to ``send``. A
request counts as received when the kernel received its last byte (its
``SO_TIMESTAMPNS`` receive timestamp), so the loop's own lateness in reading it
is not blamed on the client; each output chunk is logged at the instant it was
handed to the kernel (read just before the ``send`` call, so a client can
never seem to receive a chunk before it was sent). A client under test is
compared with what the server really did, never with the plan.

Endpoints: ``POST /v1/chat/completions`` and ``/v1/completions`` (streaming),
``GET /v1/models``, ``POST /tokenize`` (vLLM or llama.cpp style, or absent), and
``GET /_exact/log``, which returns the finished requests' truth entries and
forgets them.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import select
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import orjson

from slogate.client import kernel_time
from slogate.exactengine.behaviour import Behaviour
from slogate.exactengine.clock import TimerFd
from slogate.exactengine.truth import TruthEntry
from slogate.exactengine.writes import Request, Write, stream_writes

TokenizeStyle = Literal["vllm", "llamacpp", "none"]
MAX_HEAD_BYTES = 65536
READ_SIZE = 65536
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_IN = select.EPOLLIN
_OUT = select.EPOLLOUT


@functools.lru_cache(maxsize=256)
def framed_plan(behaviour: Behaviour, request: Request) -> tuple[Write, ...]:
    """The plan's writes with their HTTP chunk framing, computed once per distinct
    (behaviour, request): a busy server then only sends prepared bytes."""
    return tuple(
        replace(w, payload=b"%x\r\n%s\r\n" % (len(w.payload), w.payload)) if w.payload else w
        for w in stream_writes(behaviour, request)
    )


class _Stream:
    """One streaming response being played out on its connection."""

    __slots__ = ("_base", "_conn", "_index", "_plan", "entry", "over")

    def __init__(self, conn: _Connection, entry: TruthEntry, plan: tuple[Write, ...]) -> None:
        self._conn = conn
        self._base = entry.received_ns
        self._plan = plan
        self._index = 0
        self.entry = entry
        self.over = False

    def advance(self, now: int) -> int | None:
        """Execute the writes due by ``now``; the next one's instant, or None."""
        conn = self._conn
        plan = self._plan
        while not self.over:
            write = plan[self._index]
            due = self._base + write.offset_ns
            if due > now:
                return due
            if write.tokens:
                self.entry.note_chunk(time.perf_counter_ns(), write.tokens)
            if write.payload:
                conn.write(write.payload)
                if self.over:  # the client was gone: closing cancelled and filed it
                    return None
            if write.end is not None:
                self._end(write.end)
                return None
            self._index += 1
        return None

    def _end(self, ending: str) -> None:
        self.over = True
        self.entry.outcome = ending
        if ending != "abort":
            self._conn.write(b"0\r\n\r\n")
        self._conn.stream_over(self, close=ending == "abort")

    def cancel(self) -> None:
        if not self.over:
            self.over = True
            self.entry.outcome = "client_closed"


def _prompt_tokens(body: dict[str, Any]) -> int:
    """Whitespace-separated words of the prompt: the server's token count."""
    messages = body.get("messages")
    if isinstance(messages, list):
        contents = [m.get("content") for m in messages if isinstance(m, dict)]
        return sum(len(content.split()) for content in contents if isinstance(content, str))
    prompt = body.get("prompt")
    return len(prompt.split()) if isinstance(prompt, str) else 0


def _word_ids(text: str) -> list[int]:
    return [sum(word.encode()) % 50000 for word in text.split()]


class ExactServer:
    """The loop and its shared state: default behaviour, request ids, truth log."""

    def __init__(
        self,
        behaviour: Behaviour,
        model: str = "exact-model",
        tokenize: TokenizeStyle = "vllm",
        api_key: str | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.model = model
        self.tokenize = tokenize
        self.api_key = api_key
        self.log: list[TruthEntry] = []
        self.epoll = select.epoll()
        self._ids = itertools.count(1)
        self._handlers: dict[int, Callable[[int], None]] = {}
        self._heap: list[tuple[int, int, _Stream]] = []
        self._order = itertools.count()
        self._timer = TimerFd()
        self._armed_at: int | None = None
        self._listener: socket.socket | None = None

    def next_id(self) -> int:
        return next(self._ids)

    def listen(self, host: str, port: int) -> tuple[str, int]:
        """Bind; returns the bound address (port 0 picks a free one)."""
        listener = socket.create_server((host, port), backlog=4096)
        listener.setblocking(False)
        self._listener = listener
        self.watch(listener.fileno(), _IN, functools.partial(self._accept, listener))
        self.watch(self._timer.fd, _IN, self._fire)
        return listener.getsockname()[:2]

    def serve_forever(self) -> None:
        """Run until interrupted (SIGTERM/SIGINT raise out of the poll)."""
        poll = self.epoll.poll
        handlers = self._handlers
        try:
            while True:
                for fd, events in poll():
                    handler = handlers.get(fd)
                    if handler is not None:
                        handler(events)
        finally:
            self.epoll.close()
            self._timer.close()
            if self._listener is not None:
                self._listener.close()

    def watch(self, fd: int, events: int, handler: Callable[[int], None]) -> None:
        self._handlers[fd] = handler
        self.epoll.register(fd, events)

    def unwatch(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None:
            self.epoll.unregister(fd)

    def schedule(self, at_ns: int, stream: _Stream) -> None:
        heapq.heappush(self._heap, (at_ns, next(self._order), stream))
        if self._armed_at is None or at_ns < self._armed_at:
            self._armed_at = at_ns
            self._timer.arm(at_ns)

    def drain_log(self) -> list[dict[str, Any]]:
        entries, self.log = self.log, []
        return [entry.to_dict() for entry in entries]

    def _accept(self, listener: socket.socket, events: int) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                return
            _Connection(self, sock)

    def _fire(self, events: int) -> None:
        self._timer.clear()
        heap = self._heap
        now = time.perf_counter_ns()
        while heap and heap[0][0] <= now:
            stream = heapq.heappop(heap)[2]
            following = stream.advance(now)
            if following is not None:
                heapq.heappush(heap, (following, next(self._order), stream))
            now = time.perf_counter_ns()
        self._armed_at = heap[0][0] if heap else None
        if self._armed_at is not None:
            self._timer.arm(self._armed_at)


class _Connection:
    """HTTP/1.1 with keep-alive, one request at a time (no pipelining needed)."""

    def __init__(self, server: ExactServer, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        kernel_time.enable(sock)
        self.server = server
        self.sock = sock
        self.fd = sock.fileno()
        self.buffer = bytearray()
        self.outbox = bytearray()
        self.stream: _Stream | None = None
        self.keep_alive = True
        self.closing = False
        self.closed = False
        server.watch(self.fd, _IN, self._on_events)

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.outbox:
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.close()
                return
            if sent == len(data):
                return
            data = data[sent:]
            self.server.epoll.modify(self.fd, _IN | _OUT)
        self.outbox += data

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.stream is not None:
            self.stream.cancel()
            self.server.log.append(self.stream.entry)
            self.stream = None
        self.server.unwatch(self.fd)
        self.sock.close()

    def stream_over(self, stream: _Stream, close: bool) -> None:
        if self.closed:  # its last write found the client gone: close() filed it
            return
        self.server.log.append(stream.entry)
        self.stream = None
        if close or not self.keep_alive:
            self._close_after_flush()
        elif self.buffer:
            self._next_request(time.perf_counter_ns())

    def _close_after_flush(self) -> None:
        if self.outbox:
            self.closing = True
        else:
            self.close()

    def _on_events(self, events: int) -> None:
        if events & _OUT:
            self._flush()
        if events & ~_OUT and not self.closed:
            self._read()

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.outbox)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        del self.outbox[:sent]
        if not self.outbox:
            if self.closing:
                self.close()
            else:
                self.server.epoll.modify(self.fd, _IN)

    def _read(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, kernel_time.ANCILLARY_SIZE)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        self.buffer += data
        if self.stream is None:
            self._next_request(
                kernel_time.arrival_ns(
                    ancillary, kernel_time.realtime_offset_ns(), time.perf_counter_ns()
                )
            )

    def _next_request(self, now: int) -> None:
        while self.stream is None and not self.closing and not self.closed:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    self._json(431, {"error": {"message": "request head too large"}}, close=True)
                return
            lines = bytes(self.buffer[:head_end]).decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                length = -1
            if len(parts) != 3 or length < 0 or "transfer-encoding" in headers:
                self._json(400, {"error": {"message": "malformed or chunked request"}}, close=True)
                return
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            body = bytes(self.buffer[head_end + 4 : end])
            del self.buffer[:end]
            method, target, version = parts
            self.keep_alive = (
                headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
            )
            self._handle(method, target.split("?", 1)[0], headers, body, now)

    def _handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, now: int
    ) -> None:
        server = self.server
        key = server.api_key
        if key and path.startswith("/v1/") and headers.get("authorization") != f"Bearer {key}":
            got = headers.get("authorization", "")
            message = f"Incorrect API key provided: {got.removeprefix('Bearer ')}"
            self._json(401, {"error": {"message": message, "type": "invalid_request_error"}})
        elif method == "GET" and path == "/v1/models":
            model = {"id": server.model, "object": "model", "owned_by": "exactengine"}
            self._json(200, {"object": "list", "data": [model]})
        elif method == "GET" and path == "/_exact/log":
            self._json(200, {"requests": server.drain_log()})
        elif method == "POST" and path == "/tokenize" and server.tokenize != "none":
            self._tokenize(body)
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self._completion(path, body, now)
        else:
            self._json(404, {"error": {"message": f"no route {method} {path}"}})

    def _tokenize(self, body: bytes) -> None:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            request = None
        field = "prompt" if self.server.tokenize == "vllm" else "content"
        if not isinstance(request, dict) or not isinstance(request.get(field), str):
            self._json(400, {"error": {"message": f"expected {{{field!r}: string}}"}})
            return
        ids = _word_ids(request[field])
        if self.server.tokenize == "vllm":
            self._json(200, {"count": len(ids), "tokens": ids, "max_model_len": 8192})
        else:
            self._json(200, {"tokens": ids})

    def _completion(self, path: str, raw: bytes, now: int) -> None:
        server = self.server
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the request body is not a JSON object")
            behaviour = server.behaviour
            if "exactengine" in body:
                behaviour = behaviour.updated(body["exactengine"], "exactengine")
            if body.get("stream") is not True:
                raise ValueError("exactengine only streams: set stream to true")
            max_tokens = body.get("max_tokens")
            if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 0):
                raise ValueError(f"max_tokens: expected a non-negative integer, got {max_tokens!r}")
        except ValueError as exc:  # orjson.JSONDecodeError is a ValueError
            self._json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            return
        entry = TruthEntry(server.next_id(), path, now, prompt_tokens=_prompt_tokens(body))
        if behaviour.status != 200:
            entry.status = behaviour.status
            entry.outcome = "status"
            server.log.append(entry)
            message = f"exactengine: injected status {behaviour.status}"
            self._json(behaviour.status, {"error": {"message": message, "code": behaviour.status}})
            return
        options = body.get("stream_options") or {}
        request = Request(
            api="chat" if path == "/v1/chat/completions" else "completions",
            model=str(body.get("model", server.model)),
            max_tokens=max_tokens,
            include_usage=bool(options.get("include_usage")),
            continuous_usage=bool(options.get("continuous_usage_stats")),
            prompt_tokens=entry.prompt_tokens,
        )
        self.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\nx-exact-request: %d\r\n\r\n" % entry.request_id
        )
        stream = _Stream(self, entry, framed_plan(behaviour, request))
        self.stream = stream
        following = stream.advance(time.perf_counter_ns())
        if following is not None:
            server.schedule(following, stream)

    def _json(self, status: int, obj: Any, close: bool = False) -> None:
        body = orjson.dumps(obj)
        reason = _REASONS.get(status, "Status")
        close = close or not self.keep_alive
        self.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: %s\r\n\r\n%s"
            % (status, reason.encode(), len(body), b"close" if close else b"keep-alive", body)
        )
        if close:
            self._close_after_flush()
