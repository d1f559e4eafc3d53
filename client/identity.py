"""Every request's identity: a request id and a W3C trace context, sent as headers.

A latency SLO that misses sends someone to the engine's logs and the
gateway's traces for the slow requests; each request therefore carries an id
the server can log (``X-Request-Id``, which vLLM makes the reply's id: its
chat replies are ``chatcmpl-<X-Request-Id>``) and a ``traceparent``
(https://www.w3.org/TR/trace-context/, version 00): one trace for the run,
or one per conversation for multi-turn sessions, one span per request.
A ``tracestate`` the user gives goes out unchanged on every request.

The ids come from one ``os.urandom`` read per request (no uuid objects):
the client serves hundreds of streams on a core, and the header costs
about as much as formatting it (docs/load.md, "Request identity").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = [
    "REQUEST_ID_HEADER",
    "Identity",
    "RequestIds",
    "header_name",
    "new_trace_id",
    "tracestate",
]

REQUEST_ID_HEADER = "X-Request-Id"
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
# a trace or span id of all zeros is invalid (W3C trace context): the one
# draw in 2^64 (2^128) that makes one is nudged to the smallest valid id
_ONE_TRACE = "0" * 31 + "1"
_ONE_SPAN = "0" * 15 + "1"
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,256}")  # an HTTP header name (RFC 9110)
# a tracestate list member (W3C trace context, 3.3.1): key=value
_MEMBER = re.compile(
    r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)
MAX_TRACESTATE_MEMBERS = 32


def header_name(text: str) -> str:
    """An HTTP header name, as given; ValueError when it is not one."""
    if not _TOKEN.fullmatch(text):
        raise ValueError(f"{text!r} is not an HTTP header name (letters, digits, '-')")
    return text


def tracestate(text: str) -> str:
    """A W3C ``tracestate`` (``key=value`` members, comma-separated, 32 at
    most), as given; ValueError naming the member that is not one."""
    members = [member.strip(" \t") for member in text.split(",")]
    if len(members) > MAX_TRACESTATE_MEMBERS:
        raise ValueError(
            f"{len(members)} members: a tracestate has {MAX_TRACESTATE_MEMBERS} at most"
        )
    for member in members:
        if not _MEMBER.fullmatch(member):
            raise ValueError(
                f"{member!r} is not a tracestate member (key=value, W3C trace context)"
            )
    return text


def new_trace_id() -> str:
    """A fresh trace id: 32 lower-case hex digits, never all zeros."""
    trace = os.urandom(16).hex()
    return _ONE_TRACE if trace == _ZERO_TRACE else trace


@dataclass(slots=True)
class RequestIds:
    """One request's ids: its request id (32 hex digits), its trace's and its
    own span's. Not frozen: one is made per request, and a frozen one takes
    2.6 times as long (1.1 us against 0.43)."""

    request_id: str
    trace_id: str
    span_id: str


@dataclass(frozen=True, slots=True)
class Identity:
    """How a run names its requests. ``trace_id`` is the run's trace (a
    conversation may have its own); ``header`` the request id's header
    (None: the run sends none, for a server that refuses it; the id is
    still recorded); ``tracestate`` the W3C ``tracestate`` passed through."""

    trace_id: str
    header: str | None = REQUEST_ID_HEADER
    tracestate: str | None = None

    @classmethod
    def fresh(cls) -> Identity:
        """A new trace with the default header: a client outside a run (the
        selftest, a bench) still names its requests."""
        return cls(new_trace_id())

    def stamp(self, trace_id: str | None = None) -> tuple[RequestIds, bytes]:
        """A new request's ids, in ``trace_id`` (None: the run's), and the
        header lines that carry them."""
        drawn = os.urandom(24).hex()
        request_id, span_id = drawn[:32], drawn[32:]
        if span_id == _ZERO_SPAN:
            span_id = _ONE_SPAN
        trace = trace_id or self.trace_id
        lines = f"traceparent: 00-{trace}-{span_id}-01\r\n"
        if self.tracestate is not None:
            lines += f"tracestate: {self.tracestate}\r\n"
        if self.header is not None:
            lines += f"{self.header}: {request_id}\r\n"
        return RequestIds(request_id, trace, span_id), lines.encode("latin-1")
