"""The streaming HTTP client: one request in, one RequestRecord out, each output
chunk timed at the instant its bytes arrived.

It runs in Locust's gevent world (gevent sockets, so it cooperates whether or
not the process is monkey-patched) and owns its connections
(:mod:`slogate.client.connections`) instead of going through ``FastHttpSession``,
whose ``iter_lines`` delivered events 151 ms late (docs/design.md): every read returns
what has arrived, geventhttpclient's C (llhttp) parser strips the HTTP framing,
and :mod:`slogate.client.sse` and :mod:`slogate.client.openai_stream` turn the body
into the record.

Timeouts are separate and each has its error kind: connect
(``timeout_connect``), start to first output chunk (``timeout_first_token``),
and a stall between output chunks (``timeout_stall``; keep-alive comments do
not reset it). Every failure becomes a failed record: ``send`` never raises for
what a server does. The API key comes from the environment, goes out as a
Bearer token and is scrubbed from any error text. When the server sends no
usage, a tokenizer file the scenario names counts the generated text.
"""

from __future__ import annotations

import os
import re
import ssl as ssl_module
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
import orjson
from geventhttpclient._parser import HTTPParseError, HTTPResponseParser

from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.client.connections import ConnectError, Connection, Pool
from slogate.client.embeddings_api import EMBEDDINGS, read_reply
from slogate.client.engine_info import parse_base_url
from slogate.client.identity import Identity, RequestIds
from slogate.client.messages_stream import MESSAGES
from slogate.client.openai_stream import (
    CHAT,
    COMPLETIONS,
    MESSAGE_CHARS,
    StreamInterpreter,
    parse_chunk,
)
from slogate.client.protocol import Protocol, chat_messages
from slogate.client.responses_stream import RESPONSES
from slogate.client.schema_check import SchemaCheck
from slogate.client.served_by import served_by
from slogate.client.sse import SSEParser, SSEProtocolError
from slogate.client.think_tags import ThinkTags
from slogate.scenarios.model import Api, PlannedTurn, RequestOptions, Timeouts
from slogate.scenarios.prompt_text import output_token_counter

__all__ = [
    "PROTOCOLS",
    "PreparedRequest",
    "StreamClient",
    "StreamResult",
    "chat_messages",
    "error_kind_for_status",
]

ERROR_BODY_LIMIT = 65536
SHOWN_MESSAGE_CHARS = 500  # an error message as recorded: masked first, then cut to this
DRAIN_TIMEOUT_S = 1.0
PROTOCOLS: dict[str, Protocol] = {
    p.api: p for p in (CHAT, COMPLETIONS, RESPONSES, MESSAGES, EMBEDDINGS)
}
WHOLE_BODY_LIMIT = 256 * 1024 * 1024  # a non-streamed reply (a batch of embeddings)
NEVER_NS = 1 << 62  # no planned cancellation
NEVER_TOKENS = 1 << 62
HEADER_VALUE = re.compile(r"[\x21-\x7e]{1,4096}")  # a token safe to send back in a header
SET_COOKIE = "set-cookie"
# what a Cookie header can carry back (RFC 6265 cookie-octet)
COOKIE_VALUE = re.compile(r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]{1,4096}")


def set_cookie_value(set_cookie: str, name: str) -> str | None:
    """The value a reply's ``Set-Cookie`` headers (one a line) give the
    cookie ``name``, the last if several do; None when none sets it. Only
    ``name=value`` before the first ``;`` counts (its attributes, path or
    expiry, change nothing a load run does), and a value with a character a
    Cookie header cannot carry back (RFC 6265 cookie-octet) is None."""
    found = None
    for line in set_cookie.split("\n"):
        pair = line.split(";", 1)[0].strip()
        key, sep, value = pair.partition("=")
        if sep and key.strip() == name:
            value = value.strip().strip('"')
            found = value if COOKIE_VALUE.fullmatch(value) else None
    return found


class CutOff(gevent.GreenletExit):
    """The run's end killed a request (still a GreenletExit, so the kill
    succeeds). ``record`` is the request as far as it got, its ``end_ns``
    the cut: the diagnosis still needs when it was sent and when its first
    token came, since the engine worked on it beside the other streams."""

    def __init__(self, record: RequestRecord) -> None:
        super().__init__()
        self.record = record

    @property
    def sent(self) -> bool:
        """Whether its bytes had all been written (``sent_ns``), i.e. whether
        the server can have been working on it."""
        return bool(self.record.sent_ns)


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A request ready to write: its turn, its HTTP bytes (head and JSON body)
    and the ids its head carries."""

    turn: PlannedTurn
    request: bytes
    ids: RequestIds


@dataclass(slots=True)
class StreamResult:
    """The record of one request and the text it generated (the load side appends
    it to the conversation's history)."""

    record: RequestRecord
    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the reply's, assembled


def new_conversation_id() -> str:
    """A conversation's own id, as the client chooses it for a router that
    routes by it (Dynamo's ``X-Dynamo-Session-ID``): random, so no two
    conversations of any user or process share one."""
    return os.urandom(16).hex()


def error_kind_for_status(status: int) -> ErrorKind:
    if status == 429:
        return ErrorKind.HTTP_429
    if status >= 500:
        return ErrorKind.HTTP_5XX
    if status >= 400:
        return ErrorKind.HTTP_4XX
    return ErrorKind.PROTOCOL


_feed_body = HTTPResponseParser.feed


class _Response(HTTPResponseParser):
    """geventhttpclient's llhttp parser; keeps the status, the headers and the body
    pieces as they come out of the chunked framing.

    llhttp reports a header name or value in pieces only where a read ended
    inside it, and reports nothing for an empty value (llama.cpp sends
    ``Access-Control-Allow-Origin:`` empty): two name callbacks in one read are
    two headers, across reads one name cut in two."""

    def __init__(self) -> None:
        super().__init__()
        self.headers_done = False
        self.complete = False
        self.body: list[bytearray] = []
        self.headers: dict[str, str] = {}
        self._field = ""
        self._value = ""
        self._reads = 0
        self._field_read = -1  # the read in which the last name piece came

    # the C parser reads any buffer (a read's bytearray too); its stub says str | bytes
    def feed(self, data: bytes | bytearray) -> None:  # type: ignore[override]
        self._reads += 1
        super().feed(data)  # type: ignore[arg-type]

    def _on_message_begin(self) -> None:
        pass

    def _on_status(self, status: str) -> None:
        pass

    def _on_header_field(self, text: str) -> None:
        if self._value or self._field_read == self._reads:
            self._store_header()
        self._field += text
        self._field_read = self._reads

    def _on_header_value(self, text: str) -> None:
        self._value += text

    def _on_headers_complete(self) -> bool:
        self._store_header()
        self.headers_done = True
        return False  # a body follows

    def _on_body(self, data: bytearray) -> None:
        self.body.append(data)  # a fresh bytearray per call: kept without a copy

    def _on_message_complete(self) -> None:
        self.complete = True

    def _store_header(self) -> None:
        if self._field:
            field = self._field.lower()
            held = self.headers.get(field)
            # Set-Cookie is the one header a reply repeats (RFC 9110 5.3): keep each
            self.headers[field] = (
                f"{held}\n{self._value}" if held and field == SET_COOKIE else self._value
            )
        self._field = ""
        self._value = ""


class _Failure(Exception):
    """The request failed, for a reason of this kind (control flow inside here)."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Cancelled(Exception):
    """The scenario's planned cancellation came: the client lets the request go."""


class _StaleConnection(Exception):
    """A reused keep-alive connection was closed by the server before answering."""


class StreamClient:
    """Streams completions from one OpenAI-compatible server.

    ``model`` must be a real model name (resolve ``auto`` with
    :func:`slogate.client.engine_info.discover` first). ``concurrency`` sizes the
    connection pool: more concurrent ``send`` calls than that wait for a
    connection, and that wait is no part of any latency. ``kernel_timestamps``
    False times events when the read returns instead (for comparison).
    ``endpoint``: the name of this server among a run's several, on every record.
    ``identity``: how its requests are named (:mod:`slogate.client.identity`;
    None: a trace of its own, the default header).
    """

    def __init__(
        self,
        base_url: str,
        api: Api,
        model: str,
        options: RequestOptions,
        timeouts: Timeouts,
        concurrency: int,
        kernel_timestamps: bool = True,
        endpoint: str | None = None,
        identity: Identity | None = None,
    ) -> None:
        parts = parse_base_url(base_url)
        self.endpoint = endpoint
        self.identity = identity or Identity.fresh()
        if api not in PROTOCOLS:
            raise ValueError(f"api {api!r}: expected one of {sorted(PROTOCOLS)}")
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: expected at least 1")
        tls = ssl_module.create_default_context() if parts.scheme == "https" else None
        port = parts.port or (443 if tls else 80)
        self.api = api
        self.protocol = PROTOCOLS[api]
        self.model = model
        self.options = options
        self.timeouts = timeouts
        self.pool = Pool(
            parts.hostname, port, tls, concurrency, timeouts.connect_s, kernel_timestamps
        )
        self._count_tokens = output_token_counter(options.tokenizer)
        self.schemas = SchemaCheck()
        self._api_key = os.environ.get(options.api_key_env, "") if options.api_key_env else ""
        prefix = parts.path.rstrip("/").removesuffix("/v1")
        host_header = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        if parts.port is not None:
            host_header += f":{parts.port}"
        head = (
            f"POST {prefix}{self.protocol.path} HTTP/1.1\r\nHost: {host_header}\r\n"
            "User-Agent: slogate\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\n"
        )
        head += self.protocol.auth(self._api_key)
        head += "".join(f"{name}: {value}\r\n" for name, value in options.headers)
        self._head = head.encode("latin-1")

    @property
    def kernel_timestamps(self) -> bool:
        """Whether chunks are timed by the kernel's receive timestamps."""
        return self.pool.kernel_timestamps

    def close(self) -> None:
        self.pool.close()

    def body(
        self, turn: PlannedTurn, messages: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The JSON body sent for ``turn``. ``messages`` is the full chat history
        to send (ending with this turn's user message); when None it is built
        from the turn's system and user text."""
        return self.protocol.body(self.model, turn, messages, self.options)

    def _think_tags(self) -> ThinkTags | None:
        tags = self.options.think_tags
        if tags is None:
            return None
        return ThinkTags(tags[0], tags[1], starts_inside=self.options.think_starts_inside)

    def prepare(
        self,
        turn: PlannedTurn,
        messages: list[dict[str, Any]] | None = None,
        session: str | None = None,
        conversation_id: str | None = None,
        trace_id: str | None = None,
    ) -> PreparedRequest:
        """The whole HTTP request for ``turn``, encoded: open loop builds it ahead
        of the request's instant (:mod:`slogate.locustfiles.lookahead`).
        ``session``: the router's session token from the conversation's last
        reply, sent back in the scenario's ``session_header``;
        ``conversation_id``: the client's own id of the conversation, sent in
        its ``session_id_header`` (a plain token: :func:`new_conversation_id`);
        ``trace_id``: the conversation's trace (None: the run's)."""
        payload = orjson.dumps(self.body(turn, messages))
        ids, lines = self.identity.stamp(trace_id)
        head = self._head + lines
        cookie = self.options.session_cookie
        for header, value in (
            (self.options.session_header, session),
            ("cookie" if cookie else None, f"{cookie}={session}" if session else None),
            (self.options.session_id_header, conversation_id),
        ):
            if value is not None and header is not None:
                head += f"{header}: {value}\r\n".encode("latin-1")
        request = head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload
        return PreparedRequest(turn, request, ids)

    def send(
        self,
        turn: PlannedTurn,
        messages: list[dict[str, Any]] | None = None,
        scheduled_ns: int | None = None,
    ) -> StreamResult:
        """Build one streaming request, send it and follow it to its end."""
        return self.send_prepared(self.prepare(turn, messages), scheduled_ns)

    def send_prepared(
        self,
        prepared: PreparedRequest,
        scheduled_ns: int | None = None,
        writing: Callable[[], None] | None = None,
        gate: Callable[[], bool] | None = None,
    ) -> StreamResult:
        """Send a prepared request and follow it to its end. The clock starts
        just before the request is written (connecting first when no idle
        connection is left, since a real client waits for that too).
        ``writing`` is called once, as the write begins or when the request
        failed before it: open loop holds its CPU-bound preparation until every
        request handed over has reached its write. ``gate``, when given, is
        waited for once everything before the clock's start is done: open loop
        hands a request over ahead of its instant and the gate opens at it
        (False: the schedule closed first, the request is cut off unsent)."""
        turn, request, ids = prepared.turn, prepared.request, prepared.ids
        record = RequestRecord(
            scenario=turn.scenario,
            start_ns=0,
            scheduled_ns=scheduled_ns,
            conversation=turn.conversation,
            turn=turn.turn,
            intended_input_tokens=turn.intended_input_tokens,
            intended_output_tokens=turn.intended_output_tokens,
            endpoint=self.endpoint,
            request_id=ids.request_id,
            trace_id=ids.trace_id,
            span_id=ids.span_id,
        )
        stream = StreamInterpreter(
            record, self.protocol.parse or parse_chunk, self._think_tags(), self.protocol.reply_id
        )
        constraint = turn.constraint
        if constraint is not None:
            record.constrained = constraint.response_format is not None
            record.schema_first = record.constrained and self.schemas.first_sight(constraint.key)
        pool = self.pool
        writing = _Once(writing)
        try:
            with pool.slots:
                try:
                    pool.resolve()
                    exchange = _Exchange(self, stream, turn, writing)
                    if gate is not None and not gate():
                        raise gevent.GreenletExit
                    idle = pool.idle()  # taken after the gate: a cancelled one keeps none
                    record.start_ns = time.perf_counter_ns()
                    try:
                        exchange.run(request, idle)
                    except _StaleConnection:
                        _Exchange(self, stream, turn, writing).run(request, None)
                except ConnectError as exc:
                    kind = ErrorKind.TIMEOUT_CONNECT if exc.timed_out else ErrorKind.CONNECT
                    self._fail(stream, kind, str(exc))
                except _Failure as failure:
                    self._fail(stream, failure.kind, str(failure))
                except _Cancelled:
                    record.cancel(time.perf_counter_ns())
                finally:
                    writing()
        except gevent.GreenletExit as stop:
            record.end_ns = time.perf_counter_ns()
            raise CutOff(record) from stop
        if record.error_message:
            record.error_message = self._redact(record.error_message)[:SHOWN_MESSAGE_CHARS]
        text = stream.text
        if (
            record.ok
            and record.output_tokens is None
            and self._count_tokens is not None
            and len(text) == sum(record.chunk_chars)  # no reasoning or tool-call output
        ):
            record.tokenizer_tokens = self._count_tokens(text)
        if constraint is not None and record.ok:  # once, the stream over: off its reads
            record.schema_error = self.schemas.problem(constraint, text, record.finish_reason)
        return StreamResult(record, text, stream.tool_calls if record.tool_calls else [])

    def _fail(self, stream: StreamInterpreter, kind: ErrorKind, message: str) -> None:
        now = time.perf_counter_ns()
        record = stream.record
        record.start_ns = record.start_ns or now
        stream.fail(kind, message, now)

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


class _Once:
    """Calls ``callback`` (if any) the first time it is called, never again."""

    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None] | None) -> None:
        self.callback = callback

    def __call__(self) -> None:
        callback, self.callback = self.callback, None
        if callback is not None:
            callback()


class _Exchange:
    """One attempt at one request on one connection: send, read the headers, then
    follow the events, each timed at the arrival of the read that completed it."""

    __slots__ = (
        "cancel_ns",
        "cancel_tokens",
        "client",
        "conn",
        "ended_by_event",
        "eof",
        "first_deadline",
        "got_bytes",
        "record",
        "response",
        "reused",
        "sse",
        "stall_ns",
        "stream",
        "turn",
        "writing",
    )
    conn: Connection  # the idle one it was given, else one opened when it runs

    def __init__(
        self,
        client: StreamClient,
        stream: StreamInterpreter,
        turn: PlannedTurn,
        writing: _Once,
    ) -> None:
        self.client = client
        self.writing = writing
        self.turn = turn
        self.stream = stream
        self.record = stream.record
        self.reused = False  # set by run: it was given an idle connection
        self.response = _Response()
        self.got_bytes = False
        self.eof = False
        self.sse = SSEParser()
        self.ended_by_event = False
        self.first_deadline = 0  # set when the request is sent
        self.stall_ns = int(client.timeouts.stall_s * 1e9)
        self.cancel_ns = NEVER_NS  # set when the request is sent, if it is to be cancelled
        tokens = turn.cancel_after_tokens
        self.cancel_tokens = NEVER_TOKENS if tokens is None else tokens

    def run(self, request: bytes, idle: Connection | None) -> None:
        """Send on ``idle``, else on a connection opened now. The connection goes
        back to the pool only when the response was read to its end."""
        pool = self.client.pool
        self.reused = idle is not None
        self.conn = pool.connect() if idle is None else idle
        self.record.connected_ns = time.perf_counter_ns()
        reusable = False
        try:
            reusable = self._run(request)
        finally:
            pool.give_back(self.conn, reusable)

    def _run(self, request: bytes) -> bool:
        timeouts = self.client.timeouts
        start_ns = self.record.start_ns
        if self.turn.cancel_after_s is not None:
            self.cancel_ns = start_ns + int(self.turn.cancel_after_s * 1e9)
        first_deadline = self.first_deadline = min(
            start_ns + int(timeouts.first_token_s * 1e9), self.cancel_ns
        )
        try:
            self.writing()
            self.conn.send(request, first_deadline)
            self.record.sent_ns = time.perf_counter_ns()
            response = self.response
            while not response.headers_done:
                self._read(first_deadline)
            self._note_router(response.headers)
            status = response.get_code()
            if status != 200:
                raise self._http_error(status)
            content_type = response.headers.get("content-type", "")
            if not self.client.protocol.streamed:
                return self._whole(first_deadline, content_type)
            if "event-stream" not in content_type:
                message = f"expected a text/event-stream response, got {content_type!r}"
                raise _Failure(ErrorKind.PROTOCOL, message)
            return self._stream()
        except TimeoutError as exc:
            if time.perf_counter_ns() >= self.cancel_ns:
                raise _Cancelled from exc
            if self.record.chunk_ns:
                message = f"no output for {timeouts.stall_s:g} s"
                raise _Failure(ErrorKind.TIMEOUT_STALL, message) from exc
            message = f"no output within {timeouts.first_token_s:g} s"
            raise _Failure(ErrorKind.TIMEOUT_FIRST_TOKEN, message) from exc
        except HTTPParseError as exc:
            raise _Failure(ErrorKind.PROTOCOL, f"malformed HTTP response: {exc}") from exc
        except SSEProtocolError as exc:
            raise _Failure(ErrorKind.PROTOCOL, str(exc)) from exc
        except OSError as exc:
            if self.reused and not self.got_bytes:
                raise _StaleConnection from exc
            if self.response.headers_done:
                raise _Failure(ErrorKind.TRUNCATED, f"connection broke mid-stream: {exc}") from exc
            raise _Failure(ErrorKind.CONNECT, f"connection failed: {exc}") from exc

    def _note_router(self, headers: dict[str, str]) -> None:
        """Behind a router: the replica that served the request (from the
        header the scenario names, else a known router's) and the session
        token to send back, from the header the scenario names."""
        options = self.client.options
        found = served_by(headers, options.served_by_header)
        if found is not None:
            self.record.served_by_header, self.record.served_by = found
        token = None
        if options.session_header is not None:
            token = headers.get(options.session_header)
        elif options.session_cookie is not None:
            token = set_cookie_value(headers.get(SET_COOKIE, ""), options.session_cookie)
        self.record.session = token if token and HEADER_VALUE.fullmatch(token) else None

    def _read(self, deadline: int) -> None:
        """Feed what has arrived (waiting until ``deadline``) to the HTTP parser;
        ``eof`` once the server closed."""
        self._feed(self.conn.read(deadline))

    def _feed(self, data: bytes) -> None:
        if data:
            self.got_bytes = True
            self.response.feed(data)
            return
        if self.reused and not self.got_bytes:
            raise _StaleConnection
        if not self.response.headers_done:
            raise _Failure(ErrorKind.CONNECT, "the server closed the connection before answering")
        self.eof = True
        try:
            self.response.feed(b"")  # ends a close-delimited body
        except HTTPParseError:
            return  # closed mid-body: the stream is truncated, the parser has no say

    def _stream(self) -> bool:
        """Follow the event stream to its end; True when the connection is clean.
        Plain connections are read from the event loop's own callback
        (:meth:`Connection.follow`), TLS ones here."""
        if not self.take(None):
            if self.conn.tls:
                while not self.take(self.conn.read(self.deadline())):
                    pass
            else:
                self.conn.follow(self.take, self.deadline)
        return self._drain() if self.ended_by_event and self.record.ok else False

    def deadline(self) -> int:
        """First token, then stall: when the stream times out if nothing comes
        (or the planned cancellation comes, whichever is first)."""
        chunks = self.record.chunk_ns
        return min(chunks[-1] + self.stall_ns, self.cancel_ns) if chunks else self.first_deadline

    def take(self, data: bytes | None) -> bool:
        """Apply one read (None: only what the headers' read brought); True once
        the stream is over, by an event (``ended_by_event``) or by its end."""
        if data:
            _feed_body(self.response, data)  # headers are done: no read counting
        elif data is not None:
            self._feed(data)
        body = self.response.body
        stream = self.stream
        at = self.conn.at
        sse = self.sse
        for piece in body:
            if stream.on_piece(sse, piece, at):
                body.clear()
                self.ended_by_event = True
                return True
        body.clear()
        if len(self.record.chunk_ns) >= self.cancel_tokens:
            raise _Cancelled
        if not (self.response.complete or self.eof):
            return False
        for event in self.sse.close():
            if stream.on_event(event, at):
                return True
        stream.on_close(at)
        return True

    def _whole(self, deadline: int, content_type: str) -> bool:
        """A reply in one JSON body (embeddings): read it all, then check it; the
        request ends when its last bytes arrived. True when the connection is clean."""
        if "json" not in content_type:
            message = f"expected an application/json response, got {content_type!r}"
            raise _Failure(ErrorKind.PROTOCOL, message)
        response = self.response
        size = 0
        while not response.complete and not self.eof:
            self._read(deadline)
            size = sum(map(len, response.body))
            if size > WHOLE_BODY_LIMIT:
                raise _Failure(ErrorKind.PROTOCOL, f"reply larger than {WHOLE_BODY_LIMIT} bytes")
        if not response.complete:
            raise _Failure(ErrorKind.TRUNCATED, f"reply cut after {size} bytes")
        body = b"".join(response.body)
        response.body.clear()
        expected = len(self.turn.inputs) or 1
        failure = read_reply(self.record, body, expected)
        if failure is not None:
            raise _Failure(*failure)
        self.stream.finished = True
        self.record.end_ns = self.conn.at
        return response.should_keep_alive()

    def _drain(self) -> bool:
        """After ``[DONE]``: read the end of the HTTP message so the connection can
        be reused; a server that keeps the body open loses the connection."""
        response = self.response
        deadline = time.perf_counter_ns() + int(DRAIN_TIMEOUT_S * 1e9)
        try:
            while not response.complete and not self.eof:
                self._read(deadline)
                response.body.clear()
        except (TimeoutError, OSError, HTTPParseError, _Failure):
            return False
        return response.complete and response.should_keep_alive()

    def _http_error(self, status: int) -> _Failure:
        """Read the error body (bounded): the failure, with the body's message."""
        response = self.response
        deadline = time.perf_counter_ns() + int(self.client.timeouts.stall_s * 1e9)
        try:
            while (
                not response.complete
                and not self.eof
                and sum(map(len, response.body)) < ERROR_BODY_LIMIT
            ):
                self._read(deadline)
        except (TimeoutError, OSError, HTTPParseError):
            pass
        self.record.http_status = status
        text = b"".join(response.body).decode("utf-8", "replace")
        return _Failure(error_kind_for_status(status), f"HTTP {status}: {_error_text(text)}")


def _error_text(body: str) -> str:
    """The message inside an error body (OpenAI, FastAPI and plain-text styles)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.strip()[:MESSAGE_CHARS]
    if isinstance(obj, dict):
        error = obj.get("error")
        nested = error.get("message") if isinstance(error, dict) else error
        for candidate in (nested, obj.get("message"), obj.get("detail")):
            if isinstance(candidate, str) and candidate:
                return candidate[:MESSAGE_CHARS]
    return body.strip()[:MESSAGE_CHARS]
