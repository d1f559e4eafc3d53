"""What the events of an OpenAI-compatible stream mean, and the record they fill.

Pure (no I/O): :func:`parse_chunk` classifies one event's data, and
:class:`StreamInterpreter` applies a stream's events, with their arrival
instants, to a :class:`~slogate.analysis.records.RequestRecord`.

Engines differ (docs/design.md, Engines): a role-only first chunk (vLLM, SGLang),
the role on every chunk (TGI: role plus content in one chunk IS output), empty
deltas carrying only a finish_reason (SGLang), a trailing ``choices: []`` usage
chunk, cumulative usage on every chunk (vLLM ``continuous_usage_stats``),
``reasoning_content``/``reasoning`` and ``tool_calls`` deltas (they are output),
completions ``text``, errors as ``data: {"error": ...}`` with or without a
``[DONE]`` after them (llama.cpp sends none), ``event: error``, and the legacy
``error:`` field. Only chunks that carry generated output are timed.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import orjson

from slogate.analysis.records import ErrorKind, RequestRecord
from slogate.locustfiles.sse import Event

__all__ = ["Chunk", "ChunkKind", "StreamInterpreter", "parse_chunk"]

DONE = b"[DONE]"
MESSAGE_CHARS = 4096
"""Error text kept from a stream: generous, so the client can mask a secret in
it before cutting it to its final length (a key straddling the cut would
otherwise leave its first characters)."""


class ChunkKind(str, Enum):
    """What one event was, for the purpose of timing."""

    OUTPUT = "output"  # carried generated text, reasoning or a tool-call delta
    EMPTY = "empty"  # role-only, empty delta, finish_reason only, usage only
    DONE = "done"  # the ``[DONE]`` sentinel
    ERROR = "error"  # the server reported an error inside the stream
    MALFORMED = "malformed"  # not JSON, or JSON of the wrong shape


_OUTPUT = ChunkKind.OUTPUT
_EMPTY = ChunkKind.EMPTY
_REASONING_KEYS = ("reasoning_content", "reasoning")
_loads = orjson.loads


class Chunk:
    """One event, classified. ``chars`` is the length of all generated text in it
    (content, reasoning, tool-call name and arguments, completion text); ``text``
    is the part that belongs in the conversation (content or completion text).
    ``completion_tokens``/``prompt_tokens`` are the event's usage, when it had one."""

    __slots__ = (
        "chars",
        "completion_tokens",
        "finish_reason",
        "kind",
        "message",
        "prompt_tokens",
        "text",
    )

    def __init__(
        self,
        kind: ChunkKind,
        chars: int = 0,
        text: str = "",
        finish_reason: str | None = None,
        completion_tokens: int | None = None,
        prompt_tokens: int | None = None,
        message: str = "",
    ) -> None:
        self.kind = kind
        self.chars = chars
        self.text = text
        self.finish_reason = finish_reason
        self.completion_tokens = completion_tokens
        self.prompt_tokens = prompt_tokens
        self.message = message


def _error_message(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message[:MESSAGE_CHARS]
    if isinstance(error, str):
        return error[:MESSAGE_CHARS]
    return orjson.dumps(error).decode("utf-8", "replace")[:MESSAGE_CHARS]


def _tool_call_chars(calls: Any) -> int:
    if not isinstance(calls, list):
        return 0
    chars = 0
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            for key in ("name", "arguments"):
                value = function.get(key)
                if isinstance(value, str):
                    chars += len(value)
    return chars


def _choice_output(choice: dict) -> tuple[int, str]:
    """(chars of generated output, conversation text) of one choice."""
    delta = choice.get("delta")
    if delta is None:
        text = choice.get("text")
        return (len(text), text) if type(text) is str else (0, "")
    if type(delta) is not dict:
        return 0, ""
    content = delta.get("content")
    text = content if type(content) is str else ""
    chars = len(text)
    if len(delta) > 1 or not text:  # anything beside the content may be output too
        for key in _REASONING_KEYS:
            value = delta.get(key)
            if type(value) is str:
                chars += len(value)
        calls = delta.get("tool_calls")
        if calls:
            chars += _tool_call_chars(calls)
    return chars, text


def _malformed(what: str, data: bytes) -> Chunk:
    return Chunk(ChunkKind.MALFORMED, message=f"{what}: {data[:200]!r}")


def parse_chunk(data: bytes) -> Chunk:
    """Classify the data of one SSE event of a chat or completions stream.

    orjson yields exact built-in types, so the hot path tests ``type(x) is``."""
    if data == DONE:
        return Chunk(ChunkKind.DONE)
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError as exc:
        return _malformed(f"invalid JSON in stream ({exc})", data)
    if type(obj) is not dict:
        return _malformed("stream chunk is not an object", data)
    error = obj.get("error")
    if error is not None:
        return Chunk(ChunkKind.ERROR, message=_error_message(error))
    chars = 0
    text = ""
    finish = None
    choices = obj.get("choices")
    if choices:
        if type(choices) is not list:
            return _malformed("'choices' is not a list", data)
        texts = []
        for choice in choices:
            if type(choice) is not dict:
                return _malformed("a choice is not an object", data)
            n, piece = _choice_output(choice)
            chars += n
            if piece:
                texts.append(piece)
            reason = choice.get("finish_reason")
            if reason is not None:
                finish = reason if type(reason) is str else str(reason)
        text = texts[0] if len(texts) == 1 else "".join(texts)
    completion = prompt = None
    usage = obj.get("usage")
    if type(usage) is dict:
        completion = usage.get("completion_tokens")
        prompt = usage.get("prompt_tokens")
        if type(completion) is not int:
            completion = None
        if type(prompt) is not int:
            prompt = None
    return Chunk(_OUTPUT if chars else _EMPTY, chars, text, finish, completion, prompt)


class StreamInterpreter:
    """Applies one stream's events to its record, in arrival order.

    Per-chunk token counts come from cumulative usage on every chunk (vLLM
    ``continuous_usage_stats``): each output chunk gets the growth since the
    previous event; growth seen on a chunk without output (an empty delta)
    is carried to the next output chunk. When any output chunk lacked usage the
    per-chunk counts are dropped, so analysis falls back to the final count.
    """

    __slots__ = ("_carried", "_per_chunk", "_seen_tokens", "_texts", "finished", "record")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.finished = False
        self._texts: list[str] = []
        self._seen_tokens = 0
        self._carried = 0
        self._per_chunk = True

    @property
    def text(self) -> str:
        """The generated conversation text so far (content, or completion text)."""
        return "".join(self._texts)

    def on_event(self, event: Event, at_ns: int) -> bool:
        """Apply one event that arrived at ``at_ns``; True once the stream is over
        (``[DONE]``, or an error that fails the request)."""
        if event.error is not None:
            return self._fail(ErrorKind.STREAM_ERROR, event.error[:MESSAGE_CHARS], at_ns)
        if event.event == "error":
            message = event.data.decode("utf-8", "replace")[:MESSAGE_CHARS]
            return self._fail(ErrorKind.STREAM_ERROR, message, at_ns)
        chunk = parse_chunk(event.data)
        kind = chunk.kind
        record = self.record
        if kind is _OUTPUT:
            record.chunk_ns.append(at_ns)
            record.chunk_chars.append(chunk.chars)
            if chunk.text:
                self._texts.append(chunk.text)
            if self._per_chunk:
                if chunk.completion_tokens is None:
                    self._per_chunk = False
                else:
                    record.chunk_tokens.append(
                        self._carried + chunk.completion_tokens - self._seen_tokens
                    )
                    self._carried = 0
        elif kind is _EMPTY:
            if chunk.completion_tokens is not None and self._per_chunk:
                self._carried += chunk.completion_tokens - self._seen_tokens
        elif kind is ChunkKind.DONE:
            return self._finish(at_ns)
        elif kind is ChunkKind.ERROR:
            return self._fail(ErrorKind.STREAM_ERROR, chunk.message, at_ns)
        else:
            return self._fail(ErrorKind.PROTOCOL, chunk.message, at_ns)
        if chunk.completion_tokens is not None:
            self._seen_tokens = chunk.completion_tokens
            record.output_tokens = chunk.completion_tokens
        if chunk.prompt_tokens is not None:
            record.input_tokens = chunk.prompt_tokens
        if chunk.finish_reason is not None:
            record.finish_reason = chunk.finish_reason
        return False

    def on_close(self, at_ns: int) -> None:
        """The stream ended without ``[DONE]``: fine after a finish_reason, else
        truncated."""
        if self.finished:
            return
        if self.record.finish_reason is not None:
            self._finish(at_ns)
        else:
            self._fail(ErrorKind.TRUNCATED, "stream closed without [DONE] or finish_reason", at_ns)

    def fail(self, kind: ErrorKind, message: str, at_ns: int) -> None:
        """Fail the request for a reason outside the stream (timeout, connection)."""
        if not self.finished:
            self._fail(kind, message, at_ns)

    def _finish(self, at_ns: int) -> bool:
        """A proper end; one without a single output chunk fails as ``empty``: a
        server that answers only ``[DONE]`` generated nothing and must not count
        as a good request (no TTFT, no tokens)."""
        record = self.record
        if not record.chunk_ns:
            return self._fail(ErrorKind.EMPTY, "the stream ended without any output", at_ns)
        self.finished = True
        record.end_ns = at_ns
        if len(record.chunk_tokens) != len(record.chunk_ns) or not self._per_chunk:
            record.chunk_tokens.clear()
        return True

    def _fail(self, kind: ErrorKind, message: str, at_ns: int) -> bool:
        self.finished = True
        self.record.fail(kind, message, at_ns)
        return True
