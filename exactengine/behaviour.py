"""How the exact-schedule server answers one request: its schedule and its quirks.

A :class:`Behaviour` is set per server (command line) and may be overridden per
request by an ``"exactengine"`` object in the request body, so one running
server can play every engine quirk a test needs. Token counts in the ``*_after``
fields count output tokens already sent when the quirk fires.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal

RoleChunk = Literal["first", "every", "none"]
LineEnd = Literal["lf", "crlf", "cr"]
ErrorStyle = Literal["data", "field", "event"]
UsageMode = Literal["request", "always", "never"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "role_chunk": ("first", "every", "none"),
    "line_end": ("lf", "crlf", "cr"),
    "error_style": ("data", "field", "event"),
    "usage": ("request", "always", "never"),
}


@dataclass(frozen=True, slots=True)
class Behaviour:
    """Schedule: the first output chunk leaves ``ttft_ms`` after the request was
    received, and chunk i leaves ``ttft_ms + i * tokens_per_chunk * itl_ms`` after
    it (absolute, so one late write does not shift the rest), plus ``stall_ms``
    for every chunk after the ``stall_after``-th token.

    Quirks: ``role_chunk`` (a role-only first chunk like vLLM, the role on every
    chunk like TGI, or none); ``finish_separate`` (finish_reason in an empty-delta
    chunk of its own, like SGLang); ``usage`` (a ``choices: []`` usage chunk when
    the request asks for it, always, or never; ``continuous_usage_stats`` adds
    usage to every chunk); ``keepalive`` (``:`` comments at the start and between
    chunks); ``line_end``; ``data_space`` (``data: `` or ``data:``);
    ``multiline_data`` (each JSON split over two ``data`` lines);
    ``reasoning_tokens`` (the first tokens as ``reasoning_content``);
    ``tool_call`` (the output as tool-call argument deltas); ``error_after``
    (an error event, as ``data: {"error":...}``, the legacy ``error:`` field or
    ``event: error``; followed by ``[DONE]`` when ``error_done``);
    ``cut_after`` (the response ends cleanly with neither finish_reason nor
    ``[DONE]``); ``abort_after`` (the connection closes mid-body);
    ``malformed_after`` (a chunk of broken JSON); ``split_utf8`` (multi-byte text,
    each event written in two parts split inside a character,
    ``split_gap_ms`` apart); ``status`` (an HTTP error with a JSON body);
    ``done`` (send ``[DONE]``).
    """

    ttft_ms: float = 50.0
    itl_ms: float = 20.0
    output_tokens: int | None = None  # None: the request's max_tokens
    tokens_per_chunk: int = 1
    role_chunk: RoleChunk = "first"
    finish_separate: bool = False
    usage: UsageMode = "request"
    keepalive: bool = False
    line_end: LineEnd = "lf"
    data_space: bool = True
    multiline_data: bool = False
    reasoning_tokens: int = 0
    tool_call: bool = False
    error_after: int | None = None
    error_done: bool = True
    error_style: ErrorStyle = "data"
    cut_after: int | None = None
    abort_after: int | None = None
    malformed_after: int | None = None
    split_utf8: bool = False
    split_gap_ms: float = 2.0
    stall_after: int | None = None
    stall_ms: float = 0.0
    status: int = 200
    done: bool = True

    def updated(self, overrides: Any, where: str) -> Behaviour:
        """A copy with ``overrides`` (a mapping from a request body or the command
        line) applied; an unknown key or a bad value raises ValueError naming it."""
        if not isinstance(overrides, dict):
            raise ValueError(f"{where}: expected an object of behaviour fields, got {overrides!r}")
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in known:
                raise ValueError(f"{where}.{key}: unknown behaviour field; known: {sorted(known)}")
            changes[key] = _checked(key, value, getattr(self, key), where)
        result = replace(self, **changes)
        if result.tokens_per_chunk < 1:
            raise ValueError(f"{where}.tokens_per_chunk: must be at least 1")
        if result.ttft_ms < 0 or result.itl_ms < 0 or result.stall_ms < 0:
            raise ValueError(f"{where}: ttft_ms, itl_ms and stall_ms must not be negative")
        return result


def _checked(key: str, value: Any, current: Any, where: str) -> Any:
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            raise ValueError(f"{where}.{key}: expected one of {_CHOICES[key]}, got {value!r}")
        return value
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{where}.{key}: expected true or false, got {value!r}")
        return value
    if key.endswith("_ms"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}.{key}: expected a number of milliseconds, got {value!r}")
        return float(value)
    if value is None and (key.endswith("_after") or key == "output_tokens"):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}.{key}: expected a non-negative integer, got {value!r}")
    return value
