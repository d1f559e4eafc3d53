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
"""

from __future__ import annotations

__all__ = ["Event", "SSEParser"]

_LF = b"\n"
_CR = b"\r"
_COLON = 58  # ord(":")
_SPACE = b" "


class Event:
    """One dispatched event. ``data`` is the joined data lines (bytes); ``error``
    is the legacy ``error:`` field's value when the event carried one."""

    __slots__ = ("data", "error", "event", "id", "retry")

    def __init__(
        self,
        data: bytes,
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

    __hash__ = None  # mutable value object


class SSEParser:
    """Feed it the body bytes as they arrive; it returns the events they complete.

    ``comments`` counts ``:`` lines (keep-alives). ``last_id`` and ``retry`` keep
    the stream's last ``id`` and ``retry`` values, as the standard says.
    """

    __slots__ = (
        "_data",
        "_error",
        "_event",
        "_pending",
        "_skip_lf",
        "comments",
        "last_id",
        "retry",
    )

    def __init__(self) -> None:
        self._pending = b""
        self._skip_lf = False
        self._data: list[bytes] = []
        self._event: str | None = None
        self._error: str | None = None
        self.comments = 0
        self.last_id: str | None = None
        self.retry: int | None = None

    @property
    def pending(self) -> bool:
        """True while bytes of an unfinished line or event wait for more input."""
        return bool(self._pending or self._data or self._event or self._error is not None)

    def feed(self, chunk: bytes | bytearray) -> list[Event]:
        """Parse ``chunk`` (the next bytes of the stream); return completed events.
        Their ``data`` is of ``chunk``'s type (bytes or bytearray)."""
        if (
            chunk[-2:] == b"\n\n"
            and chunk[:5] == b"data:"
            and chunk.find(_LF) == len(chunk) - 2
            and not self._pending
            and not self._data
            and not self._skip_lf
            and self._event is None
            and self._error is None
            and _CR not in chunk
        ):  # the usual read: exactly one event of one data line, nothing pending
            data = chunk[6:-2] if chunk[5:6] == _SPACE else chunk[5:-2]
            return [Event(data, None, self.last_id, self.retry)]
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == _LF:
                chunk = chunk[1:]
        if _CR in chunk:
            self._skip_lf = chunk[-1:] == _CR
            chunk = chunk.replace(b"\r\n", _LF).replace(_CR, _LF)
        if self._pending:
            chunk = self._pending + chunk
        lines = chunk.split(_LF)
        self._pending = lines.pop()
        events: list[Event] = []
        data = self._data
        for line in lines:
            if not line:
                if data or self._error is not None:
                    events.append(self._dispatch())
                    data = self._data
                else:
                    self._event = None
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == _SPACE else line[5:])
            elif line[0] == _COLON:
                self.comments += 1
            else:
                self._field(line)
        return events

    def close(self) -> list[Event]:
        """End of stream. A blank line is implied: an event whose lines were all
        complete is still dispatched (some servers omit the final blank line);
        an unfinished line is dropped, as the standard says."""
        self._pending = b""
        self._skip_lf = False
        if self._data or self._error is not None:
            return [self._dispatch()]
        self._event = None
        return []

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if colon and value[:1] == _SPACE:
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
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
        return event
