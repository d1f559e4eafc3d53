"""The writes that answer one streaming request, each with the instant it is due.

Pure: :func:`stream_writes` turns a behaviour and a parsed request into the
ordered SSE writes (offsets from the instant the request was received), and the
server only executes them. Keeping the plan apart from the I/O lets the quirks
be read, and tested, as data; and since the bytes depend on nothing but
(behaviour, request), the server computes each distinct plan once.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Literal

import orjson

from slogate.exactengine.behaviour import Behaviour

DEFAULT_TOKENS = 16
CREATED = int(time.time())
ASCII_VOCABULARY = (
    "The",
    " quick",
    " brown",
    " fox",
    " jumps",
    " over",
    " the",
    " lazy",
    " dog",
    ".",
)
UTF8_VOCABULARY = (" 日本", "語", " café", " 🙂", " über")
KEEPALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"
ERROR_MESSAGE = "exactengine: injected error"
MALFORMED = b'data: {"choices": [{"index": 0, "delta": {"content": "x"\n\n'
_LINE_ENDS = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}
Ending = Literal["done", "error", "cut", "abort"]


@dataclass(frozen=True, slots=True)
class Request:
    """What the plan needs from a request body."""

    api: Literal["chat", "completions"]
    model: str
    max_tokens: int | None
    include_usage: bool
    continuous_usage: bool
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class Write:
    """Bytes due ``offset_ns`` after the request was received. ``tokens`` > 0
    marks the write that completes an output chunk (the truth log times it);
    ``end`` closes the response and names how it ended: ``"done"``, ``"error"``
    (after an error event) and ``"cut"`` send the terminating chunk; ``"abort"``
    closes the connection mid-body."""

    offset_ns: int
    payload: bytes
    tokens: int = 0
    end: Ending | None = None


def token_text(vocabulary: tuple[str, ...], index: int) -> str:
    return vocabulary[index % len(vocabulary)]


class _Encoder:
    """Builds the SSE event bytes of one response in the behaviour's dialect."""

    def __init__(self, behaviour: Behaviour, request: Request) -> None:
        self.b = behaviour
        self.r = request
        prefix = "chatcmpl" if request.api == "chat" else "cmpl"
        self.head = {
            "id": f"{prefix}-exact",
            "object": "chat.completion.chunk" if request.api == "chat" else "text_completion",
            "created": CREATED,
            "model": request.model,
        }
        self.line_end = _LINE_ENDS[behaviour.line_end]
        self.data_prefix = b"data: " if behaviour.data_space else b"data:"

    def usage(self, completion: int) -> dict[str, int]:
        prompt = self.r.prompt_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def event(self, body: bytes) -> bytes:
        if self.b.multiline_data:
            cut = body.find(b',"') + 1
            if cut > 0:
                body = body[:cut] + b"\n" + self.data_prefix + body[cut:]
        return self.framed(self.data_prefix + body + b"\n\n")

    def framed(self, event: bytes) -> bytes:
        return event if self.line_end == b"\n" else event.replace(b"\n", self.line_end)

    def chunk(self, delta: dict, text: str, finish: str | None, completion: int | None) -> bytes:
        if self.r.api == "chat":
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        obj: dict[str, object] = {**self.head, "choices": [choice]}
        if completion is not None:
            obj["usage"] = self.usage(completion)
        return self.event(orjson.dumps(obj))

    def usage_chunk(self, completion: int) -> bytes:
        return self.event(
            orjson.dumps({**self.head, "choices": [], "usage": self.usage(completion)})
        )

    def error(self) -> bytes:
        error = {"message": ERROR_MESSAGE, "type": "server_error", "code": 500}
        if self.b.error_style == "field":
            return self.framed(b"error: " + orjson.dumps(error) + b"\n\n")
        if self.b.error_style == "event":
            return self.framed(b"event: error\n" + self.data_prefix + orjson.dumps(error) + b"\n\n")
        return self.event(orjson.dumps({"error": error}))


def _delta(b: Behaviour, first_index: int, texts: list[str], is_first_chunk: bool) -> dict:
    """The chat delta of a chunk of tokens starting at ``first_index``."""
    delta: dict = {"role": "assistant"} if b.role_chunk == "every" else {}
    reasoning = [t for i, t in enumerate(texts) if first_index + i < b.reasoning_tokens]
    content = texts[len(reasoning) :]
    if reasoning:
        delta["reasoning_content"] = "".join(reasoning)
    if b.tool_call:
        call: dict = {"index": 0, "function": {"arguments": "".join(content)}}
        if is_first_chunk:
            call = {
                "index": 0,
                "id": "call_0",
                "type": "function",
                "function": {"name": "lookup", "arguments": "".join(content)},
            }
        delta["tool_calls"] = [call]
    elif content or not reasoning:
        delta["content"] = "".join(content)
    return delta


def _split_inside_character(payload: bytes) -> int:
    """An index that falls inside the first multi-byte UTF-8 character, or 0."""
    for i, byte in enumerate(payload):
        if byte >= 0xC0:
            return i + 1
    return 0


def stream_writes(b: Behaviour, r: Request) -> Iterator[Write]:
    """The writes of one 200 streaming response, in time order."""
    enc = _Encoder(b, r)
    n = b.output_tokens if b.output_tokens is not None else (r.max_tokens or DEFAULT_TOKENS)
    finish = "length" if r.max_tokens is not None and n >= r.max_tokens else "stop"
    usage_chunk = b.usage == "always" or (b.usage == "request" and r.include_usage)
    continuous = r.continuous_usage and b.usage != "never"
    vocabulary = UTF8_VOCABULARY if b.split_utf8 else ASCII_VOCABULARY
    ttft_ns = int(b.ttft_ms * 1e6)
    gap_ns = int(b.tokens_per_chunk * b.itl_ms * 1e6)
    stall_ns = int(b.stall_ms * 1e6)

    if r.api == "chat" and b.role_chunk == "first":
        yield Write(
            0, enc.chunk({"role": "assistant", "content": ""}, "", None, 0 if continuous else None)
        )
    if b.keepalive:
        yield Write(0, enc.framed(KEEPALIVE))

    sent = 0
    index = 0
    previous_at = 0
    while True:
        at = ttft_ns + index * gap_ns
        if b.stall_after is not None and sent >= b.stall_after:
            at += stall_ns
        if sent == n:
            at = previous_at if index else ttft_ns
        ending = yield from _quirks(b, enc, sent, at)
        if ending or sent == n:
            break
        if b.keepalive and index:
            yield Write((previous_at + at) // 2, enc.framed(KEEPALIVE))
        k = min(b.tokens_per_chunk, n - sent)
        texts = [token_text(vocabulary, sent + i) for i in range(k)]
        last = sent + k == n
        payload = enc.chunk(
            _delta(b, sent, texts, index == 0),
            "".join(texts),
            finish if last and not b.finish_separate else None,
            sent + k if continuous else None,
        )
        cut = _split_inside_character(payload) if b.split_utf8 else 0
        if cut:
            early = max(previous_at, at - int(b.split_gap_ms * 1e6))
            yield Write(early, payload[:cut])
            payload = payload[cut:]
        yield Write(at, payload, tokens=k)
        sent += k
        index += 1
        previous_at = at
    if ending:
        return
    previous_at = at
    if b.finish_separate:
        delta = {} if r.api == "completions" else {"content": ""}
        yield Write(previous_at, enc.chunk(delta, "", finish, n if continuous else None))
    if usage_chunk:
        yield Write(previous_at, enc.usage_chunk(n))
    if b.done:
        yield Write(previous_at, enc.framed(DONE))
    yield Write(previous_at, b"", end="done")


def _quirks(b: Behaviour, enc: _Encoder, sent: int, at: int) -> Generator[Write, None, bool]:
    """The quirks that fire once ``sent`` tokens are out; returns True when one
    ended the response."""
    if b.malformed_after == sent:
        yield Write(at, enc.framed(MALFORMED))
    if b.error_after == sent:
        yield Write(at, enc.error())
        if b.error_done:
            yield Write(at, enc.framed(DONE))
        yield Write(at, b"", end="error")
        return True
    if b.cut_after == sent:
        yield Write(at, b"", end="cut")
        return True
    if b.abort_after == sent:
        yield Write(at, b"", end="abort")
        return True
    return False
