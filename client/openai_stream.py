"""What the events of an OpenAI-compatible stream mean, and the record they fill.

Pure (no I/O): :func:`parse_chunk` classifies one event's data of a chat or
completions stream, and :class:`StreamInterpreter` applies a stream's events,
with their arrival instants, to a :class:`~slogate.analysis.measurement.records.RequestRecord`.
The other protocols (:mod:`slogate.client.responses_stream`,
:mod:`slogate.client.messages_stream`) classify their events into the same
:class:`Chunk` and share the interpreter.

Engines differ (docs/design.md, Engines): a role-only first chunk (vLLM, SGLang),
the role on every chunk (TGI: role plus content in one chunk IS output), empty
deltas carrying only a finish_reason (SGLang), a trailing ``choices: []`` usage
chunk, cumulative usage on every chunk (vLLM ``continuous_usage_stats``),
``reasoning_content``/``reasoning`` (vLLM, SGLang, DeepSeek; newer vLLM and
OpenRouter) and ``tool_calls`` deltas (they are output; reasoning is kept apart
from the answer), ``<think>...</think>`` inside the content of a server without
a reasoning parser (:mod:`slogate.client.think_tags`),
completions ``text``, errors as ``data: {"error": ...}`` with or without a
``[DONE]`` after them (llama.cpp sends none), ``event: error``, and the legacy
``error:`` field. Only chunks that carry generated output are timed.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

import orjson

from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.client.chunk_template import ChunkTemplate, learn_template
from slogate.client.engine_timings import EngineTimings, engine_timings
from slogate.client.protocol import Protocol, bearer, chat_messages, common_options
from slogate.client.sse import Event, SSEParser
from slogate.client.think_tags import ThinkTags
from slogate.scenarios.model import PlannedTurn, RequestOptions

__all__ = [
    "CHAT",
    "COMPLETIONS",
    "Chunk",
    "ChunkKind",
    "ChunkParser",
    "ImplausibleUsage",
    "StreamInterpreter",
    "as_chunk",
    "chunk_object",
    "parse_chunk",
]

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
_DONE = ChunkKind.DONE
_ERROR = ChunkKind.ERROR
_REASONING_KEYS = ("reasoning_content", "reasoning")
_loads = orjson.loads
TEMPLATE_LESSONS = 3
"""Plain text events a stream may learn its template from: an engine whose
chunks differ in more than their text (a changing id or time) stops paying
for learning after this many."""


class Chunk:
    """One event, classified. ``chars`` is the length of all generated text in it
    (content, reasoning, tool-call name and arguments, completion text), of
    which ``reasoning`` characters were reasoning; ``text`` is the part that
    belongs in the conversation (content or completion text).
    ``completion_tokens``/``prompt_tokens``/``reasoning_tokens`` are the event's
    usage, when it had one, and ``cached_tokens`` the prompt tokens the server
    served from its prefix cache; ``tools`` the tool-call deltas it carried;
    ``drafts`` the speculative (drafted, accepted) tokens of the request
    (llama.cpp's ``timings``); ``timings`` the engine's own timing of the
    request, on the chunk that carried it (:mod:`slogate.client.engine_timings`)."""

    __slots__ = (
        "cached_tokens",
        "chars",
        "completion_tokens",
        "drafts",
        "finish_reason",
        "kind",
        "message",
        "prompt_tokens",
        "reasoning",
        "reasoning_tokens",
        "text",
        "timings",
        "tools",
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
        reasoning: int = 0,
        reasoning_tokens: int | None = None,
        tools: list[ToolDelta] | None = None,
        cached_tokens: int | None = None,
        drafts: tuple[int, int] | None = None,
        timings: EngineTimings | None = None,
    ) -> None:
        self.kind = kind
        self.timings = timings
        self.cached_tokens = cached_tokens
        self.drafts = drafts
        self.chars = chars
        self.text = text
        self.finish_reason = finish_reason
        self.completion_tokens = completion_tokens
        self.prompt_tokens = prompt_tokens
        self.message = message
        self.reasoning = reasoning
        self.reasoning_tokens = reasoning_tokens
        self.tools = tools


ChunkParser = Callable[[bytes | bytearray], "Chunk | str"]
"""A protocol's event reader: a Chunk, or only answer text as a plain str (the
hot path: no Chunk built)."""


def error_message(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message[:MESSAGE_CHARS]
    if isinstance(error, str):
        return error[:MESSAGE_CHARS]
    return orjson.dumps(error).decode("utf-8", "replace")[:MESSAGE_CHARS]


# One piece of a tool call, the same for every protocol: (index of the call in
# the reply, its id or "", the function name or "", a piece of the arguments).
ToolDelta = tuple[int, str, str, str]


def _text(value: Any) -> str:
    return value if type(value) is str else ""


def tool_deltas(calls: Any) -> list[ToolDelta]:
    """Chat's ``delta.tool_calls`` list as tool deltas (malformed items skipped)."""
    if not isinstance(calls, list):
        return []
    deltas = []
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        index = call.get("index")
        deltas.append(
            (
                index if type(index) is int else position,
                _text(call.get("id")),
                _text(function.get("name")),
                _text(function.get("arguments")),
            )
        )
    return deltas


def tool_chars(deltas: list[ToolDelta]) -> int:
    return sum(len(name) + len(arguments) for _, _, name, arguments in deltas)


def _choice_output(choice: dict[str, Any]) -> tuple[int, int, str, list[ToolDelta] | None]:
    """(chars of generated output, chars of reasoning, conversation text, tool
    deltas or None) of one choice."""
    delta = choice.get("delta")
    if delta is None:
        text = choice.get("text")
        return (len(text), 0, text, None) if type(text) is str else (0, 0, "", None)
    if type(delta) is not dict:
        return 0, 0, "", None
    content = delta.get("content")
    text = content if type(content) is str else ""
    chars = len(text)
    reasoning = 0
    tools = None
    if len(delta) > 1 or not text:  # anything beside the content may be output too
        for key in _REASONING_KEYS:
            value = delta.get(key)
            if type(value) is str:
                reasoning += len(value)
        calls = delta.get("tool_calls")
        if calls:
            tools = tool_deltas(calls)
            chars += tool_chars(tools)
    return chars + reasoning, reasoning, text, tools


MAX_USAGE_TOKENS = (1 << 31) - 1
"""The largest token count a usage field may hold: a thousand times the longest
context window, and 2^32 requests of it still sum within the 64 bits the run's
data is saved in (a count of 2^62 once broke the journal, issue 42 N3)."""


class ImplausibleUsage(ValueError):
    """A usage field holds an integer no token count can be: the request's
    protocol error (:meth:`StreamInterpreter.parsed`), never a number kept."""


def usage_int(usage: dict[str, Any], key: str, details: str | None = None) -> int | None:
    """``usage[key]`` (or ``usage[details][key]``) when it is an integer;
    ImplausibleUsage when it is one below 0 or above MAX_USAGE_TOKENS."""
    if details is not None:
        inner = usage.get(details)
        if type(inner) is not dict:
            return None
        usage = inner
    value = usage.get(key)
    if type(value) is not int:
        return None
    if not 0 <= value <= MAX_USAGE_TOKENS:
        raise ImplausibleUsage(
            f"usage {key} is {value}: not a token count (0 to {MAX_USAGE_TOKENS})"
        )
    return value


def _event_error(data: bytes | bytearray) -> str:
    """The message of an ``event: error`` (JSON with an error object, or text)."""
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", "replace")[:MESSAGE_CHARS]
    if type(obj) is dict and obj.get("error") is not None:
        return error_message(obj["error"])
    return error_message(obj)


def malformed(what: str, data: bytes | bytearray) -> Chunk:
    return Chunk(ChunkKind.MALFORMED, message=f"{what}: {bytes(data[:200])!r}")


def event_object(data: bytes | bytearray) -> dict[str, Any] | Chunk:
    """The JSON object an API's stream event holds, or the malformed chunk
    saying why it holds none."""
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError as exc:
        return malformed(f"invalid JSON in stream ({exc})", data)
    if type(obj) is not dict:
        return malformed("stream event is not an object", data)
    return obj


def as_chunk(parsed: Chunk | str) -> Chunk:
    """What a ChunkParser returned, as a Chunk (plain text is an output chunk)."""
    if isinstance(parsed, str):
        return Chunk(_OUTPUT, len(parsed), parsed)
    return parsed


def _plain_text(obj: dict[str, Any]) -> str | None:
    """The text of the usual chunk: one choice whose delta (or completions
    choice) holds nothing but non-empty text, no finish reason, no usage, no
    error; None for any other shape. Exactly what the general reading below
    would make of such a chunk, without building a Chunk."""
    choices = obj.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if delta is None:
        text = choice.get("text")
    elif type(delta) is dict and len(delta) == 1:
        text = delta.get("content")
    else:
        return None
    if type(text) is not str or not text or obj.get("error") is not None:
        return None
    return text if type(obj.get("usage")) is not dict else None


def parse_chunk(data: bytes | bytearray) -> Chunk | str:
    """Classify the data of one SSE event of a chat or completions stream: a
    Chunk, or for the usual chunk (only answer text) the text itself.

    orjson yields exact built-in types, so the hot path tests ``type(x) is``."""
    if data == DONE:
        return Chunk(ChunkKind.DONE)
    obj = event_object(data)
    if isinstance(obj, Chunk):
        return obj
    text = _plain_text(obj)
    return text if text is not None else chunk_object(obj, data)


def chunk_object(obj: dict[str, Any], data: bytes | bytearray) -> Chunk:
    """Classify a chat or completions chunk's JSON object (``data``: its bytes,
    quoted when it is malformed): the general reading, for every shape."""
    error = obj.get("error")
    if error is not None:
        return Chunk(ChunkKind.ERROR, message=error_message(error))
    chars = reasoning = 0
    text = ""
    finish = None
    tools = None
    choices = obj.get("choices")
    if choices:
        if type(choices) is not list:
            return malformed("'choices' is not a list", data)
        texts = []
        for choice in choices:
            if type(choice) is not dict:
                return malformed("a choice is not an object", data)
            n, r, piece, calls = _choice_output(choice)
            chars += n
            reasoning += r
            if calls:
                tools = calls if tools is None else tools + calls
            if piece:
                texts.append(piece)
            reason = choice.get("finish_reason")
            if reason is not None:
                finish = reason if type(reason) is str else str(reason)
        text = texts[0] if len(texts) == 1 else "".join(texts)
    usage = obj.get("usage")
    timings = engine_timings(obj)
    if type(usage) is not dict:
        kind = _OUTPUT if chars else _EMPTY
        return Chunk(
            kind, chars, text, finish, None, None, "", reasoning, None, tools, timings=timings
        )
    return Chunk(
        _OUTPUT if chars else _EMPTY,
        chars,
        text,
        finish,
        usage_int(usage, "completion_tokens"),
        usage_int(usage, "prompt_tokens"),
        reasoning=reasoning,
        reasoning_tokens=usage_int(usage, "reasoning_tokens", "completion_tokens_details"),
        tools=tools,
        cached_tokens=usage_int(usage, "cached_tokens", "prompt_tokens_details"),
        drafts=speculation_counts(obj.get("timings")),
        timings=timings,
    )


def speculation_counts(timings: Any) -> tuple[int, int] | None:
    """(drafted, accepted) tokens from llama.cpp's ``timings`` object (its
    ``draft_n`` and ``draft_n_accepted``); None when it has no such counts or
    they cannot be true (accepted above drafted, negative, not integers)."""
    if type(timings) is not dict:
        return None
    drafted, accepted = timings.get("draft_n"), timings.get("draft_n_accepted")
    if type(drafted) is not int or type(accepted) is not int:
        return None
    if not 0 <= accepted <= drafted <= MAX_USAGE_TOKENS:
        return None
    return drafted, accepted


def note_usage(record: RequestRecord, chunk: Chunk) -> None:
    """What a usage object says beside the output count: the prompt's tokens,
    those cached, the reasoning tokens, and the speculative drafts of the
    request and its queue and prefill times (llama.cpp's ``timings``, vLLM's
    ``metrics``, which come with its usage); each only when the event said it."""
    if chunk.prompt_tokens is not None:
        record.input_tokens = chunk.prompt_tokens
    if chunk.cached_tokens is not None:
        record.cached_tokens = chunk.cached_tokens
    if chunk.reasoning_tokens is not None:
        record.reasoning_tokens = chunk.reasoning_tokens
    if chunk.drafts is not None:
        record.draft_tokens, record.accepted_tokens = chunk.drafts
    if chunk.timings is not None:
        record.engine_queue_ms, record.engine_prefill_ms, record.engine_prompt_tokens = (
            chunk.timings
        )


class StreamInterpreter:
    """Applies one stream's events to its record, in arrival order.

    ``parse`` classifies an event's data (the protocol's own parser: chat and
    completions by default). ``think_tags`` splits ``<think>...</think>`` out
    of the content when the server has no reasoning parser; it is dropped as
    soon as the content is seen to start without the tag, so a plain stream
    pays one check.

    Per-chunk token counts come from cumulative usage on every chunk (vLLM
    ``continuous_usage_stats``): each output chunk gets the growth since the
    previous event; growth seen on a chunk without output (an empty delta)
    is carried to the next output chunk. When any output chunk lacked usage the
    per-chunk counts are dropped, so analysis falls back to the final count.

    ``reply_id`` reads the engine's id of the reply from the first event
    (:meth:`Protocol.reply_id <slogate.client.protocol.Protocol.reply_id>`);
    the later ones are not asked, so a stream pays for one parse more.
    """

    __slots__ = (
        "_calls",
        "_carried",
        "_lessons",
        "_parse",
        "_per_chunk",
        "_reply_id",
        "_seen_tokens",
        "_tags",
        "_template",
        "_texts",
        "finished",
        "record",
    )

    def __init__(
        self,
        record: RequestRecord,
        parse: ChunkParser = parse_chunk,
        think_tags: ThinkTags | None = None,
        reply_id: Callable[[bytes | bytearray], str | None] | None = None,
    ) -> None:
        self.record = record
        self.finished = False
        self._parse = parse
        self._reply_id = reply_id
        self._tags = think_tags
        self._texts: list[str] = []
        self._seen_tokens = 0
        self._carried = 0
        self._per_chunk = True
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, argument pieces]
        self._template: ChunkTemplate | None = None
        self._lessons = TEMPLATE_LESSONS

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls of the reply, assembled, in the OpenAI chat shape (what
        an agent sends back in the assistant message)."""
        return [
            {
                "id": call_id or f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": "".join(pieces)},
            }
            for index, (call_id, name, pieces) in sorted(self._calls.items())
        ]

    @property
    def text(self) -> str:
        """The generated answer text so far (content, or completion text), without
        reasoning: what goes back into the conversation."""
        return "".join(self._texts)

    def on_event(self, event: Event, at_ns: int) -> bool:
        """Apply one event that arrived at ``at_ns``; True once the stream is over
        (the end of the stream, or an error that fails the request)."""
        if event.error is not None:
            return self._fail(ErrorKind.STREAM_ERROR, event.error[:MESSAGE_CHARS], at_ns)
        if event.event == "error":
            return self._fail(ErrorKind.STREAM_ERROR, _event_error(event.data), at_ns)
        return self.on_data(event.data, at_ns)

    def on_piece(self, sse: SSEParser, piece: bytes | bytearray, at_ns: int) -> bool:
        """Apply the events one piece of the body completes, all arrived at
        ``at_ns``; True once the stream is over (later events are ignored).

        The usual piece is one plain text event: read through the stream's
        template once one was learnt (:mod:`slogate.client.chunk_template`),
        else parsed and, the first few times, learnt from."""
        answer_only = self._answer_only()
        if answer_only and self._template is not None and sse.idle:
            text = self._template.text_of(piece, sse.max_event_bytes)
            if text is not None:
                self._plain(text, at_ns)
                return False
        data = sse.lone_data(piece)
        if data is None:
            return any(self.on_event(event, at_ns) for event in sse.feed(piece))
        chunk = self.parsed(data)
        if answer_only and type(chunk) is str and self._template is None and self._lessons:
            self._lessons -= 1
            self._template = learn_template(piece, chunk, self._parse, sse.max_event_bytes)
        return self._take(chunk, at_ns, answer_only)

    def on_data(self, data: bytes | bytearray, at_ns: int) -> bool:
        """Apply the data of a plain event (no event name, no error field)."""
        return self._take(self.parsed(data), at_ns, self._answer_only())

    def parsed(self, data: bytes | bytearray) -> Chunk | str:
        """What the protocol's reader makes of ``data``; an implausible usage
        count makes it malformed, a protocol error of this request alone."""
        if self._reply_id is not None:
            read, self._reply_id = self._reply_id, None
            self.record.engine_request_id = read(data)
        try:
            return self._parse(data)
        except ImplausibleUsage as exc:
            return malformed(str(exc), data)

    def _answer_only(self) -> bool:
        """Plain text is all answer: no think tags to split it, no reasoning so far
        (whose per-chunk list every later chunk must extend)."""
        return self._tags is None and not self.record.chunk_reasoning

    def _take(self, chunk: Chunk | str, at_ns: int, answer_only: bool) -> bool:
        """Apply what the protocol's reader made of one event's data (``answer_only``
        as :meth:`_answer_only` said before it: parsing does not change it)."""
        if type(chunk) is str and answer_only:
            self._plain(chunk, at_ns)
            return False
        return self._apply(as_chunk(chunk), at_ns)

    def _plain(self, text: str, at_ns: int) -> None:
        """An output chunk of answer text only (what the general reading does with it)."""
        record = self.record
        record.chunk_ns.append(at_ns)
        record.chunk_chars.append(len(text))
        self._texts.append(text)
        self._per_chunk = False

    def _apply(self, chunk: Chunk, at_ns: int) -> bool:
        record = self.record
        kind = chunk.kind
        if kind is _OUTPUT:
            record.chunk_ns.append(at_ns)
            record.chunk_chars.append(chunk.chars)
            if self._tags is None:
                if chunk.text:
                    self._texts.append(chunk.text)
                if chunk.reasoning or record.chunk_reasoning:
                    self._note_reasoning(chunk.reasoning)
            else:
                self._tagged(chunk)
            if chunk.tools is not None:
                self._note_tools(chunk.tools, at_ns)
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
        elif kind is _ERROR:
            return self._fail(ErrorKind.STREAM_ERROR, chunk.message, at_ns)
        elif kind is not _DONE:
            return self._fail(ErrorKind.PROTOCOL, chunk.message, at_ns)
        if chunk.completion_tokens is not None:
            self._seen_tokens = chunk.completion_tokens
            record.output_tokens = chunk.completion_tokens
        note_usage(record, chunk)
        if chunk.finish_reason is not None:
            record.finish_reason = chunk.finish_reason
        return kind is _DONE and self._finish(at_ns)

    def _tagged(self, chunk: Chunk) -> None:
        """An output chunk while ``<think>`` tags may still split its content."""
        reasoning, text = chunk.reasoning, chunk.text
        if text:
            tags = self._tags
            assert tags is not None
            chars, text = tags.split(text)
            reasoning += chars
            if tags.settled:
                self._tags = None
        if text:
            self._texts.append(text)
        if reasoning or self.record.chunk_reasoning:
            self._note_reasoning(reasoning)

    def _note_tools(self, deltas: list[ToolDelta], at_ns: int) -> None:
        """Assemble tool calls from their deltas; time the first and count them."""
        record = self.record
        if record.tool_call_ns is None:
            record.tool_call_ns = at_ns
        calls = self._calls
        for index, call_id, name, arguments in deltas:
            call = calls.get(index)
            if call is None:
                call = calls[index] = ["", "", []]
            if call_id:
                call[0] = call_id
            call[1] += name
            if arguments:
                call[2].append(arguments)
                record.tool_arg_bytes += len(arguments.encode("utf-8", "replace"))
        record.tool_calls = len(calls)

    def _note_reasoning(self, chars: int) -> None:
        """Keep ``chunk_reasoning`` parallel to the chunks from the first reasoning on."""
        reasoning = self.record.chunk_reasoning
        if not reasoning:
            reasoning.extend([0] * (len(self.record.chunk_ns) - 1))
        reasoning.append(chars)

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


def _body(
    api: str,
    model: str,
    turn: PlannedTurn,
    messages: list[dict[str, Any]] | None,
    options: RequestOptions,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "stream": True, "max_tokens": turn.max_tokens}
    if api == "chat":
        body["messages"] = chat_messages(turn) if messages is None else messages
        if options.tools:
            body["tools"] = [{"type": "function", "function": tool} for tool in options.tools]
        if turn.constraint is not None and turn.constraint.response_format is not None:
            body["response_format"] = turn.constraint.response_format
    else:
        body["prompt"] = turn.prompt
    if options.include_usage or options.continuous_usage is True:
        stream_options: dict[str, Any] = {"include_usage": True}
        if options.continuous_usage is True:
            stream_options["continuous_usage_stats"] = True
        body["stream_options"] = stream_options
    return common_options(body, turn, options)


def chat_body(
    model: str, turn: PlannedTurn, messages: list[dict[str, Any]] | None, options: RequestOptions
) -> dict[str, Any]:
    """A streamed ``/v1/chat/completions`` body that asks for usage."""
    return _body("chat", model, turn, messages, options)


def completions_body(
    model: str, turn: PlannedTurn, messages: list[dict[str, Any]] | None, options: RequestOptions
) -> dict[str, Any]:
    """A streamed ``/v1/completions`` body: the turn's prompt alone."""
    return _body("completions", model, turn, messages, options)


CHAT = Protocol("chat", "/v1/chat/completions", chat_body, parse_chunk, bearer)
COMPLETIONS = Protocol(
    "completions", "/v1/completions", completions_body, parse_chunk, bearer, conversational=False
)
