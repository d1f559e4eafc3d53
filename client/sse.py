"""Incremental Server-Sent Events parser: bytes in, in any split, events out.

Pure (no I/O, no Locust, no gevent) so it can be tested byte by byte and reused
anywhere. It follows the WHATWG event-stream rules that matter for inference
servers:

- lines end with LF, CRLF or CR, also when a CR ends one read and its LF starts
  the next;
- ``field:value`` with or without one space after the colon; a line without a
  colon is a field with an empty value;
- ``data`` lines of one event are joined with ``\\n``; a blank line dispatches;
  an event with no ``data`` line is not dispatched;
- ``:`` lines are comments (keep-alives), counted and otherwise ignored;
- ``event``, ``id`` and ``retry`` are kept; the legacy ``error`` field that old
  llama.cpp builds send instead of ``data`` dispatches an event of its own.

Lines stay bytes until they are complete, so a UTF-8 character split across two
reads is never garbled; ``data`` stays bytes (orjson parses bytes directly) and
the other fields are decoded once their line is complete.

Memory and time are bounded whatever the server sends: the pieces of an
unfinished line are kept in a list and joined once, when its line end arrives
(a long line costs linear time, not a copy per read), and the bytes one event
holds (its data and error lines plus the unfinished line) may not pass
``max_event_bytes``: past it :class:`SSEProtocolError` is raised, so a server
that never sends the blank line cannot grow the client without limit.
"""

from __future__ import annotations

__all__ = ["MAX_EVENT_BYTES", "Event", "SSEParser", "SSEProtocolError", "lone_event_data"]

MAX_EVENT_BYTES = 1024 * 1024
"""The default bound on one event (docs/reliability.md): OpenAI-style chunks are a
few hundred bytes, a large tool call some kilobytes; 1 MiB leaves room for any real one
and bounds a client with N streams in flight to N MiB of held events."""

_LF = b"\n"
_CR = b"\r"
_COLON = 58  # ord(":")
_SPACE = b" "
_SPACE_BYTE = 32


class SSEProtocolError(ValueError):
    """The stream broke a bound of the protocol (an event larger than allowed).
    The parser is reset; the stream cannot be followed any further."""


class Event:
    """One dispatched event. ``data`` is the joined data lines (bytes, or the
    read's bytearray when the event came in one read); ``error``
    is the legacy ``error:`` field's value when the event carried one."""

    __slots__ = ("data", "error", "event", "id", "retry")

    def __init__(
        self,
        data: bytes | bytearray,
        event: str | None = None,
        id: str | None = None,
        retry: int | None = None,
        error: str | None = None,
    ) -> None:
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry
        self.error = error

    def __repr__(self) -> str:
        return (
            f"Event(data={self.data!r}, event={self.event!r}, id={self.id!r}, "
            f"retry={self.retry!r}, error={self.error!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.data, self.event, self.id, self.retry, self.error) == (
            other.data,
            other.event,
            other.id,
            other.retry,
            other.error,
        )

    # a mutable value object: unhashable, as a dataclass with eq is; mypy wants
    # the Callable object declares, which None is not
    __hash__ = None  # type: ignore[assignment]


def lone_event_data(chunk: bytes | bytearray, max_event_bytes: int) -> bytes | bytearray | None:
    """The data of ``chunk`` when it is exactly one event of one data line (what
    a parser with nothing pending makes of it), else None."""
    if (
        chunk.startswith(b"data:")
        and chunk.endswith(b"\n\n")
        and chunk.find(_LF) == len(chunk) - 2
        and _CR not in chunk
        and len(chunk) <= max_event_bytes
    ):
        return chunk[6:-2] if chunk[5] == _SPACE_BYTE else chunk[5:-2]
    return None


class SSEParser:
    """Feed it the body bytes as they arrive; it returns the events they complete.

    ``comments`` counts ``:`` lines (keep-alives). ``last_id`` and ``retry`` keep
    the stream's last ``id`` and ``retry`` values, as the standard says.
    ``max_event_bytes`` bounds what one event may hold (SSEProtocolError past it).
    """

    __slots__ = (
        "_data",
        "_error",
        "_event",
        "_held",
        "_idle",
        "_skip_lf",
        "_tail",
        "comments",
        "last_id",
        "max_event_bytes",
        "retry",
    )

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes {max_event_bytes}: expected at least 1")
        self.max_event_bytes = max_event_bytes
        self._tail: list[bytes | bytearray] = []  # the pieces of the unfinished line
        self._held = 0  # bytes of the event so far: data, error and unfinished line
        self._skip_lf = False
        self._idle = True  # nothing pending: no unfinished line or event, no CR to pair
        self._data: list[bytes | bytearray] = []
        self._event: str | None = None
        self._error: str | None = None
        self.comments = 0
        self.last_id: str | None = None
        self.retry: int | None = None

    @property
    def pending(self) -> bool:
        """True while bytes of an unfinished line or event wait for more input."""
        return bool(self._tail or self._data or self._event or self._error is not None)

    @property
    def idle(self) -> bool:
        """Nothing pending: no unfinished line or event, no CR waiting for its LF."""
        return self._idle

    def lone_data(self, chunk: bytes | bytearray) -> bytes | bytearray | None:
        """The data of ``chunk`` when it is the usual read: exactly one event of one
        data line, nothing pending; None otherwise (then ``feed`` it). The hot path
        asks this first and skips building an Event."""
        return lone_event_data(chunk, self.max_event_bytes) if self._idle else None

    def feed(self, chunk: bytes | bytearray) -> list[Event]:
        """Parse ``chunk`` (the next bytes of the stream); return completed events.
        Their ``data`` is of ``chunk``'s type (bytes or bytearray) when the event
        came in one read. SSEProtocolError when the event grows past the bound."""
        data = self.lone_data(chunk)
        if data is not None:
            return [Event(data, None, self.last_id, self.retry)]
        try:
            return self._feed(chunk)
        finally:
            self._idle = not (
                self._tail
                or self._data
                or self._skip_lf
                or self._event is not None
                or self._error is not None
            )

    def _feed(self, chunk: bytes | bytearray) -> list[Event]:
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == _LF:
                chunk = chunk[1:]
        if _CR in chunk:
            self._skip_lf = chunk[-1:] == _CR
            chunk = chunk.replace(b"\r\n", _LF).replace(_CR, _LF)
        if _LF not in chunk:
            if chunk:
                self._tail.append(chunk)
                self._held += len(chunk)
                if self._held > self.max_event_bytes:
                    self._overflow()
            return []
        tail = self._tail
        held = self._held
        if tail:
            size = len(chunk)
            tail.append(chunk)
            chunk = b"".join(tail)
            tail.clear()
            held -= len(chunk) - size  # the unfinished line is in ``chunk`` now
        lines = chunk.split(_LF)
        rest = lines.pop()
        events: list[Event] = []
        data = self._data
        for line in lines:
            if not line:
                if data or self._error is not None:
                    if held > self.max_event_bytes:  # the whole event came in one read
                        self._held = held
                        self._overflow()
                    events.append(self._dispatch())
                    data = self._data
                    held = 0
                else:
                    self._event = None
            elif line[:5] == b"data:":
                value = line[6:] if line[5:6] == _SPACE else line[5:]
                data.append(value)
                held += len(value) + 1  # an empty line costs its list entry too
            elif line[0] == _COLON:
                self.comments += 1
            else:
                held += self._field(line)
        if rest:
            tail.append(rest)
            held += len(rest)
        self._held = held
        if held > self.max_event_bytes:
            self._overflow()
        return events

    def close(self) -> list[Event]:
        """End of stream. A blank line is implied: an event whose lines were all
        complete is still dispatched (some servers omit the final blank line);
        an unfinished line is dropped, as the standard says."""
        self._held -= sum(map(len, self._tail))
        self._tail.clear()
        self._skip_lf = False
        self._idle = True
        if self._data or self._error is not None:
            return [self._dispatch()]
        self._event = None
        return []

    def _overflow(self) -> None:
        held = self._held
        self._tail.clear()
        self._skip_lf = False
        self._data = []
        self._event = None
        self._error = None
        self._held = 0
        raise SSEProtocolError(
            f"an SSE event grew past {self.max_event_bytes} bytes ({held} held) without "
            "its blank line: the server is not sending events"
        )

    def _field(self, line: bytes | bytearray) -> int:
        """Apply one non-data field line; the bytes it adds to the event."""
        name, colon, value = line.partition(b":")
        if colon and value[:1] == _SPACE:
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            return len(value) + 1
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self.last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self.retry = int(value)
        elif name == b"error":
            text = value.decode("utf-8", "replace")
            self._error = text if self._error is None else self._error + "\n" + text
            return len(value) + 1
        return 0

    def _dispatch(self) -> Event:
        data = self._data
        event = Event(
            data[0] if len(data) == 1 else _LF.join(data),
            self._event,
            self.last_id,
            self.retry,
            self._error,
        )
        self._data = []
        self._event = None
        self._error = None
        self._held = 0
        return event
