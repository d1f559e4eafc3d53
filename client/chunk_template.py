"""The bytes every plain text event of one stream shares, to read the next
ones without parsing JSON.

An engine's text chunks differ only in their text: vLLM sends
``data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,
"model":"m","choices":[{"index":0,"delta":{"content":"<TEXT>"},
"logprobs":null,"finish_reason":null}]}`` and only ``<TEXT>`` changes. Once one
such event was read the general way (SSE, JSON, the protocol's reading), the
bytes around its text are the template: a later event that starts and ends
with them and holds, between them, bytes no JSON string would treat specially
(no quote, no backslash, no control character) is a plain text event of that
text. That is exact, not a guess: a probe (the template around other text) is
read the general way before the template is trusted, which proves the slot
is the text's string literal; plain characters in that literal are read as
themselves, and strict UTF-8 decoding refuses what JSON would. Anything else
(a finish reason, usage, reasoning, escapes, another shape) misses the
template and is read the general way. It saves the JSON parse, the objects it
builds and the shape checks: about a third of the client's CPU per event.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from slogate.client.sse import lone_event_data

__all__ = ["ChunkTemplate", "learn_template"]

_SPECIAL = re.compile(rb'["\\\x00-\x1f]')  # what a JSON string literal reads as not itself
_PROBES = ("zq", "qz")


class ChunkTemplate:
    """The bytes before and after the text of a stream's plain text events."""

    __slots__ = ("_cut", "_prefix", "_size", "_suffix")

    def __init__(self, prefix: bytes, suffix: bytes) -> None:
        self._prefix = prefix
        self._suffix = suffix
        self._size = len(prefix) + len(suffix)
        self._cut = -len(suffix)

    def text_of(self, piece: bytes | bytearray, max_event_bytes: int) -> str | None:
        """The text of ``piece`` when it is this template around plain non-empty
        text (and within the event size bound), else None."""
        if (
            len(piece) > self._size
            and piece.startswith(self._prefix)
            and piece.endswith(self._suffix)
            and len(piece) <= max_event_bytes
        ):
            raw = piece[len(self._prefix) : self._cut]
            if _SPECIAL.search(raw) is None:
                try:
                    return raw.decode("utf-8")
                except UnicodeDecodeError:
                    return None
        return None


def learn_template(
    piece: bytes | bytearray,
    text: str,
    read: Callable[[bytes | bytearray], object],
    max_event_bytes: int,
) -> ChunkTemplate | None:
    """The template of ``piece``, a lone event whose data ``read`` (the protocol's
    chunk reader) made the plain text ``text`` of; None when the text is not
    written plainly in it or the probe is not read as its own text."""
    raw = text.encode("utf-8")
    if _SPECIAL.search(raw) is not None:
        return None
    end = piece.rfind(b'"' + raw + b'"')
    if end < 0:
        return None
    prefix, suffix = bytes(piece[: end + 1]), bytes(piece[end + 1 + len(raw) :])
    probe = _PROBES[text == _PROBES[0]]
    data = lone_event_data(prefix + probe.encode() + suffix, max_event_bytes)
    if data is None or read(data) != probe:
        return None
    return ChunkTemplate(prefix, suffix)
