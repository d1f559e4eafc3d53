"""Server-sent events in vLLM's shapes, built from pre-encoded bytes.

One request streams many chunks that differ only in their text, token count
and finish reason, so each :class:`ChunkEncoder` encodes the constant parts
(id, model, timestamps) once and a chunk is a few byte concatenations, and
:class:`SseStream` writes it to the socket from inside the engine loop, with
no task switch per token: that is what lets one core stream a thousand
requests. Fault injection that happens inside a stream is applied here.

Chat (``/v1/chat/completions``): a role-only first chunk (``{"role":
"assistant", "content": ""}``), content chunks, the finish reason on the last
content chunk, then with ``stream_options.include_usage`` a ``"choices": []``
chunk carrying usage, then ``data: [DONE]``. Completions: the same without the
role chunk, with ``text`` instead of ``delta``. ``continuous_usage_stats`` adds
cumulative usage to every chunk, as vLLM does. A reasoning model's first
tokens go out as ``reasoning_content`` deltas (vLLM with a reasoning parser),
and usage then counts them in ``completion_tokens_details.reasoning_tokens``.
The Responses and Messages APIs have encoders of their own
(:mod:`slogate.simengine.responses_sse`, :mod:`slogate.simengine.messages_sse`)
with the same methods, so :class:`SseStream` serves every API.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Protocol

import orjson

from slogate.simengine.engine import TokenStream
from slogate.simengine.faults import FaultPlan
from slogate.simengine.grammar import JsonText
from slogate.simengine.scheduler import Sequence
from slogate.simengine.token_io import Prose

DONE = b"data: [DONE]\n\n"
_CONTROL_ESCAPE = re.compile(rb"\\(?:[nrtbf]|u[0-9a-fA-F]{4})")
WRITE_BUFFER_LIMIT = 1 << 16  # above this the client lags: tokens merge into later chunks


def _usage(prompt: int, completion: int, reasoning: int = 0, cached: int | None = None) -> bytes:
    """vLLM's usage object; ``cached``: the prompt tokens found in the prefix
    cache, sent in the final usage (vLLM with ``--enable-prompt-tokens-details``)."""
    usage = b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d' % (
        prompt,
        prompt + completion,
        completion,
    )
    if reasoning:
        usage += b',"completion_tokens_details":{"reasoning_tokens":%d}' % reasoning
    if cached is not None:
        usage += b',"prompt_tokens_details":{"cached_tokens":%d}' % cached
    return usage + b"}"


def timings(seq: Sequence, speedup: float) -> bytes:
    """llama.cpp's ``timings`` object of a finished request, in wall-clock ms
    (model time / ``speedup``: the client's clock), with the engine's queue as
    ``queue_ms`` (which llama.cpp does not send): the queue is from joining the
    scheduler's queue (after the front end) to the start of the first step
    that computed it, the prompt from that start to the first token, the prediction from the
    first token to the last (docs/engines.md, "Per-request timings"); and
    for a request that drafted, its speculative counts (``draft_n``,
    ``draft_n_accepted``), which llama.cpp leaves out for one that did not."""
    ms = 1000.0 / speedup
    queued = seq.queued_at or 0.0
    # a step that began before the request joined (the loop ran late) counts
    # from the joining: the queue is never negative
    started = max(seq.scheduled_at or queued, queued)
    first = seq.first_token_time or started
    queue_ms = (started - queued) * ms
    prompt_ms = (first - started) * ms
    predicted_ms = (seq.last_token_time - first) * ms
    cached = seq.num_cached_tokens or 0
    prompt_n = seq.prompt_len - cached
    predicted_n = seq.output_len
    drafts = (
        {"draft_n": seq.draft_tokens, "draft_n_accepted": seq.accepted_tokens}
        if seq.draft_tokens
        else {}
    )
    return orjson.dumps(
        {
            "queue_ms": round(queue_ms, 3),
            "cache_n": cached,
            "prompt_n": prompt_n,
            "prompt_ms": round(prompt_ms, 3),
            "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
            "prompt_per_second": 1000.0 * prompt_n / prompt_ms if prompt_ms else 0.0,
            "predicted_n": predicted_n,
            "predicted_ms": round(predicted_ms, 3),
            "predicted_per_token_ms": predicted_ms / predicted_n if predicted_n else 0.0,
            "predicted_per_second": 1000.0 * predicted_n / predicted_ms if predicted_ms else 0.0,
            **drafts,
        }
    )


def error_event(message: str, kind: str, code: int) -> bytes:
    """An error inside a stream, as vLLM sends it (then ``[DONE]``)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _argument_text(escaped: bytes) -> bytes:
    """JSON-escaped prose made safe to sit inside a JSON string that is itself
    inside a JSON string (tool-call arguments): no quotes, backslashes or
    control characters left to escape twice."""
    text = escaped.replace(b"\\\\", b"/").replace(b'\\"', b"'")
    return _CONTROL_ESCAPE.sub(b" ", text)


def tool_arguments(escaped_text: bytes, first: bool, last: bool) -> bytes:
    """One piece of a simulated tool call's arguments, ``{"query": "<text>"}``,
    as JSON-string content (every API streams arguments as a string of JSON):
    the first piece opens the object, the last closes it."""
    arguments = _argument_text(escaped_text)
    if first:
        arguments = b'{\\"query\\": \\"' + arguments
    if last:
        arguments += b'\\"}'
    return arguments


class Encoder(Protocol):
    """What :class:`SseStream` needs of an API's event shapes."""

    def opening(self) -> bytes: ...

    def content(
        self,
        escaped_text: bytes,
        completion_tokens: int,
        finish_reason: str | None,
        reasoning: bool = False,
    ) -> bytes: ...

    def closing(self, completion_tokens: int, finish_reason: str) -> bytes: ...

    def error(self, message: str) -> bytes: ...

    def malformed(self) -> bytes: ...


class ChunkEncoder:
    """Encodes one request's chunks; ``chat`` selects the chat shape.
    ``reasoning_tokens`` is how many of the first output tokens are reasoning."""

    __slots__ = (
        "_continuous",
        "_head",
        "_include_usage",
        "_mid",
        "_reasoning_tokens",
        "_role",
        "_seq",
        "_speedup",
        "_tool",
        "_tool_started",
        "chat",
    )

    def __init__(
        self,
        *,
        chat: bool,
        request_id: str,
        created: int,
        model: str,
        seq: Sequence,
        continuous_usage: bool,
        include_usage: bool = True,
        reasoning_tokens: int = 0,
        tool: tuple[str, str] | None = None,
        speedup: float = 1.0,
    ) -> None:
        self.chat = chat
        self._speedup = speedup
        self._tool = tool  # (call id, function name): the answer is this tool call
        self._tool_started = False
        self._seq = seq  # its prompt length, and its cached tokens once admitted
        self._continuous = continuous_usage
        self._include_usage = include_usage
        self._reasoning_tokens = reasoning_tokens
        obj = b"chat.completion.chunk" if chat else b"text_completion"
        self._head = b'data: {"id":%s,"object":"%s","created":%d,"model":%s,"choices":' % (
            orjson.dumps(request_id),
            obj,
            created,
            orjson.dumps(model),
        )
        # Between the text and the finish reason.
        self._mid = (
            b'"},"logprobs":null,"finish_reason":'
            if chat
            else b'","logprobs":null,"finish_reason":'
        )
        self._role = self._head + (
            b'[{"index":0,"delta":{"role":"assistant","content":""},'
            b'"logprobs":null,"finish_reason":null}]'
        )

    def _tail(self, completion_tokens: int) -> bytes:
        if self._continuous:
            return b"," + self._usage(completion_tokens) + b"}\n\n"
        return b"}\n\n"

    def _usage(self, completion_tokens: int, final: bool = False) -> bytes:
        reasoning = min(completion_tokens, self._reasoning_tokens)
        cached = self._seq.num_cached_tokens if final else None
        return _usage(self._seq.prompt_len, completion_tokens, reasoning, cached)

    def opening(self) -> bytes:
        """What precedes the first token: chat's role-only chunk."""
        return self._role + self._tail(0) if self.chat else b""

    def content(
        self,
        escaped_text: bytes,
        completion_tokens: int,
        finish_reason: str | None,
        reasoning: bool = False,
    ) -> bytes:
        """A chunk with JSON-escaped ``escaped_text`` (reasoning, or answer);
        ``completion_tokens`` is the cumulative count (used only with
        continuous usage stats)."""
        if reasoning:
            opening = b'[{"index":0,"delta":{"reasoning_content":"'
        elif self._tool is not None:
            return self._tool_chunk(escaped_text, completion_tokens, finish_reason)
        elif self.chat:
            opening = b'[{"index":0,"delta":{"content":"'
        else:
            opening = b'[{"index":0,"text":"'
        if finish_reason is None:
            end = b'null,"stop_reason":null}]'
        else:
            end = b'"%s","stop_reason":null}]' % finish_reason.encode()
        return self._head + opening + escaped_text + self._mid + end + self._tail(completion_tokens)

    def _tool_chunk(
        self, escaped_text: bytes, completion_tokens: int, finish_reason: str | None
    ) -> bytes:
        """The answer as one tool call whose arguments, ``{"query": "<text>"}``,
        stream a piece per chunk (vLLM's tool parser shape: the id and name
        first, then argument deltas), ending with finish reason ``tool_calls``."""
        assert self._tool is not None
        arguments = tool_arguments(escaped_text, not self._tool_started, finish_reason is not None)
        if not self._tool_started:
            self._tool_started = True
            call_id, name = self._tool
            head = b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"%s","type":"function",' % (
                call_id.encode()
            )
            head += b'"function":{"name":"%s","arguments":"' % name.encode()
        else:
            head = b'[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"'
        if finish_reason is None:
            end = b'"}}]},"logprobs":null,"finish_reason":null}]'
        else:
            end = b'"}}]},"logprobs":null,"finish_reason":"tool_calls"}]'
        return self._head + head + arguments + end + self._tail(completion_tokens)

    def closing(self, completion_tokens: int, finish_reason: str) -> bytes:
        """After the last content chunk (which carried the finish reason): the
        ``"choices": []`` usage chunk when asked for, with the engine's own
        timings as llama.cpp sends them, then ``[DONE]``."""
        if not self._include_usage:
            return DONE
        usage = self._usage(completion_tokens, True)
        timed = b',"timings":' + timings(self._seq, self._speedup)
        return self._head + b"[]," + usage + timed + b"}\n\n" + DONE

    def error(self, message: str) -> bytes:
        """An error inside the stream, as vLLM sends it, then ``[DONE]``."""
        return error_event(message, "InternalServerError", 500) + DONE

    def malformed(self) -> bytes:
        """A chunk cut off in the middle of its JSON (fault injection)."""
        return self._head + b'[{"index":0,"delta":{"content":"\n\n'


class SseStream(TokenStream):
    """Writes one request's chunks when the engine loop hands it tokens.

    A chunk goes out when ``stream_interval`` tokens are pending (the first
    token at once) and the socket is not backed up; tokens that wait merge
    into the next chunk, as vLLM merges them for a lagging client. The handler
    awaits :attr:`over`, which resolves to ``done``, ``error``, ``cut`` or
    ``gone`` (client disconnected). ``first_written`` is called as the
    first token's bytes are handed to the socket, just before the write: the
    request's TTFT ends there. Read after it, the clock would count the time
    the kernel gives the client woken by the write (on a busy machine,
    milliseconds) to the engine."""

    writes_first_token = True

    __slots__ = (
        "_chunked",
        "_encoder",
        "_faults",
        "_first_written",
        "_interval",
        "_malformed_at",
        "_paused",
        "_prose",
        "_reasoning_tokens",
        "_stall_at",
        "_stop_at",
        "_text_start",
        "_text_tokens",
        "_transport",
        "over",
        "sent",
    )

    def __init__(
        self,
        seq: Sequence,
        *,
        encoder: Encoder,
        prose: Prose | JsonText,
        text_start: int,
        interval: int,
        faults: FaultPlan,
        first_written: Callable[[Sequence], None],
        reasoning_tokens: int = 0,
    ) -> None:
        super().__init__(seq)
        self._encoder = encoder
        self._first_written = first_written
        self._reasoning_tokens = reasoning_tokens
        self._prose = prose
        self._text_start = text_start
        # The EOS token, when the sequence stops on it, has no text.
        self._text_tokens = seq.max_output - (1 if seq.stops_at_eos else 0)
        self._interval = interval
        self._faults = faults
        self._stop_at = min(
            p for p in (faults.error_at, faults.cut_at, seq.max_output) if p is not None
        )
        self._stall_at = faults.stall_at
        self._malformed_at = faults.malformed_at
        self._transport: asyncio.Transport | None = None
        self._chunked = True
        self._paused = False
        self.sent = 0
        self.over: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def attach(self, transport: asyncio.Transport, chunked: bool) -> None:
        """Start writing (response headers are out); ``chunked``: HTTP/1.1 framing."""
        self._transport = transport
        self._chunked = chunked
        self.on_tokens()

    def on_tokens(self) -> None:
        if self._transport is None or self._paused or self.over.done():
            return
        seq = self.seq
        pending = min(seq.output_len, self._stop_at) - self.sent
        if self.sent + pending < self._stop_at:
            if pending < (1 if self.sent == 0 else self._interval):
                return
            if self._transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
                return
        self._flush()

    def _flush(self) -> None:
        transport, seq, faults = self._transport, self.seq, self._faults
        assert transport is not None
        if transport.is_closing():
            self._end("gone")
            return
        if self._stall_at is not None and self.sent > 0 and seq.output_len >= self._stall_at:
            self._stall_at = None
            self._paused = True
            asyncio.get_running_loop().call_later(faults.stall_s, self._resume)
            return
        encoder = self._encoder
        upto = min(seq.output_len, self._stop_at)
        parts = []
        if self.sent == 0:
            parts.append(encoder.opening())
        if self._malformed_at is not None and upto >= self._malformed_at:
            self._malformed_at = None
            parts.append(encoder.malformed())
        start, end = min(self.sent, self._text_tokens), min(upto, self._text_tokens)
        # set once the last token is out: the sequence finished with it
        finish = seq.finish_reason if upto == seq.max_output else None
        thinking = self._reasoning_tokens
        if start < thinking:  # the reasoning part of these tokens
            cut = min(end, thinking)
            text = self._prose.escaped_slice(self._text_start + start, cut - start)
            parts.append(encoder.content(text, min(upto, thinking), None, reasoning=True))
            start = cut
        if start < end or finish is not None:
            text = self._prose.escaped_slice(self._text_start + start, end - start)
            parts.append(encoder.content(text, upto, finish))
        outcome = None
        if finish is not None:
            parts.append(encoder.closing(upto, finish))
            outcome = "done"
        elif upto == faults.error_at:
            parts.append(encoder.error("simulated engine error (fault injection)"))
            outcome = "error"
        elif upto == faults.cut_at:
            outcome = "cut"
        payload = b"".join(parts)
        if self.sent == 0:
            self._first_written(seq)
        self.sent = upto
        transport.write(b"%x\r\n%b\r\n" % (len(payload), payload) if self._chunked else payload)
        if outcome == "cut":
            transport.close()  # after the buffered bytes: the body never ends properly
        if outcome is not None:
            self._end(outcome)

    def _resume(self) -> None:
        self._paused = False
        if not self.over.done() and self.seq.output_len > self.sent:
            self._flush()

    def _end(self, outcome: str) -> None:
        if not self.over.done():
            self.over.set_result(outcome)
