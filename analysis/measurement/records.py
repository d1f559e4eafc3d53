"""The per-request record: what one streamed request did, as raw timestamps.

A record holds only what was observed (monotonic ``perf_counter_ns`` instants and
counts), never derived latencies, so every metric can be recomputed from it and
checked by hand. It is the boundary between the load side (``locustfiles/``),
which fills it in, and ``analysis/``, which turns it into numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class ErrorKind(str, Enum):
    """Why a request failed; each kind is counted separately in the summary."""

    CONNECT = "connect"
    TIMEOUT_CONNECT = "timeout_connect"
    TIMEOUT_FIRST_TOKEN = "timeout_first_token"
    TIMEOUT_STALL = "timeout_stall"
    HTTP_429 = "http_429"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    STREAM_ERROR = "stream_error"
    TRUNCATED = "truncated"
    EMPTY = "empty"  # the stream ended properly but carried no output at all
    PROTOCOL = "protocol"


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One agent session: its requests (steps) from the first one's start to
    the last one's end. ``outcome``: ``answered`` (a reply without tool calls,
    or every call of a replayed tree), ``unfinished`` (the step limit came
    first) or ``failed`` (a request failed). A replayed tree also says how
    long its requests took in all (``engine_ns``: its agents' requests added
    up, so parallel subagents count each), how long it waited on tools and
    thinking (``tool_ns``) and its prompt and output tokens (``tokens``)."""

    steps: int
    start_ns: int
    end_ns: int
    outcome: str
    engine_ns: int | None = None
    tool_ns: int | None = None
    tokens: int | None = None


# Who sent a request (``RequestRecord.user``), in one int: the sender's kind,
# its load process (the Locust worker's index) and its number there, so the
# senders of different processes never share an id. A closed-loop user sends
# its conversations one after another; an open-loop run has no users, so its
# lane is the sending slot a request held (the dispatcher's pool, the lowest
# free one), or for a replayed agent session, the session.
SENDER_KINDS = ("user", "slot", "session")
USER, SLOT, SESSION = range(len(SENDER_KINDS))
_NUMBER_BITS, _PROCESS_BITS = 32, 16


def sender(kind: int, process: int, number: int) -> int:
    """The id of ``kind``'s ``number``-th sender of load process ``process``."""
    return (kind << (_NUMBER_BITS + _PROCESS_BITS)) | (process << _NUMBER_BITS) | number


def sender_parts(user: int) -> tuple[str, int, int]:
    """An id's kind (as a word), process and number."""
    kind = user >> (_NUMBER_BITS + _PROCESS_BITS)
    process = (user >> _NUMBER_BITS) & ((1 << _PROCESS_BITS) - 1)
    return SENDER_KINDS[kind], process, user & ((1 << _NUMBER_BITS) - 1)


class CountMethod(str, Enum):
    """Where a request's output token counts came from, best first."""

    USAGE = "usage"
    TOKENIZER = "tokenizer"
    CHUNKS = "chunks"


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it.

    ``chunk_ns`` holds the arrival instant of every chunk that carried generated
    output (content, reasoning or tool-call delta, or completion text); role-only,
    empty and usage-only chunks are not in it. ``chunk_chars`` is the text length
    of each of those chunks and ``chunk_tokens`` their exact token counts when the
    server reported per-chunk usage (else empty). ``output_tokens`` is the
    server's usage count when it sent one; ``tokenizer_tokens`` the count of a
    configured tokenizer over the generated text when it did not.
    ``stalled_same_reads`` counts the chunks timed by the same read as the one
    before them while the load process's loop was held (set by the load side:
    the generator's fault, not the engine's batching).

    ``chunk_reasoning`` is the reasoning (thinking) part of each output chunk's
    characters, parallel to ``chunk_chars``; it stays empty while the stream
    carried no reasoning, so a plain stream pays nothing for it.
    ``reasoning_tokens`` is the server's count of them when it sent one
    (``usage.completion_tokens_details.reasoning_tokens`` or the Responses
    API's ``output_tokens_details``).

    ``draft_tokens`` and ``accepted_tokens`` are the speculative drafts the
    engine verified for this request and how many of them it accepted, when
    it says (llama.cpp's ``timings.draft_n`` and ``draft_n_accepted``).

    ``cached_tokens`` is how many of the prompt's tokens the server said it
    served from its prefix cache (``usage.prompt_tokens_details.cached_tokens``,
    the Responses API's ``input_tokens_details``, Anthropic's
    ``cache_read_input_tokens``); None when the reply did not say.

    Open loop, where the lateness of a request's send came from:
    ``prepare_wait_ns`` is how long after ``scheduled_ns`` the dispatcher
    waited for the request to be built (the look-ahead fell behind),
    ``cap_wait_ns`` how much of the rest until its send started the
    dispatcher waited for a free slot under ``load.max_in_flight`` (for it or
    the arrivals before it: the engine's queue, not the generator's fault),
    ``connected_ns`` when it had a connection (``start_ns`` when an idle one
    was waiting) and ``sent_ns`` when its bytes were handed to the kernel
    (0: never written).

    ``user`` is who sent it (:func:`sender`), set by the load side: the
    request timeline draws each sender's requests in its own lane.

    The engine's own account of the wait for the first token, where its reply
    carried one (llama.cpp's ``timings``, vLLM's ``metrics``): ``engine_queue_ms``
    its queue (None: the engine does not say), ``engine_prefill_ms`` its
    prefill up to the first token, ``engine_prompt_tokens`` the prompt tokens
    it computed (not served from its cache). Milliseconds on the engine's
    clock: a span, never an instant, so it compares with the client's.

    The request's identity, as the client sent it (docs/load.md, "Request
    identity"): ``request_id`` (its ``X-Request-Id``, or the header the run
    names; recorded even where the run sends none), ``trace_id`` (32 hex
    digits) and ``span_id`` (16) of its W3C ``traceparent``; and
    ``engine_request_id``, the ``id`` the engine gave its reply (vLLM makes
    it ``chatcmpl-`` and the request id), None when the reply had none. So
    one request can be found in the engine's logs and a tracing backend.
    """

    scenario: str
    start_ns: int
    end_ns: int = 0
    scheduled_ns: int | None = None
    conversation: int = 0
    turn: int = 0
    user: int = 0
    chunk_ns: list[int] = field(default_factory=list)
    chunk_chars: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    chunk_reasoning: list[int] = field(default_factory=list)
    output_tokens: int | None = None
    tokenizer_tokens: int | None = None
    reasoning_tokens: int | None = None
    inputs: int | None = None  # embeddings: texts in the request's batch
    # tool calls: the first tool-call chunk's arrival, how many calls, argument bytes
    tool_call_ns: int | None = None
    tool_calls: int = 0
    tool_arg_bytes: int = 0
    input_tokens: int | None = None
    cached_tokens: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    intended_input_tokens: int | None = None
    intended_output_tokens: int | None = None
    finish_reason: str | None = None
    error: ErrorKind | None = None
    error_message: str = ""
    http_status: int | None = None
    stalled_same_reads: int = 0
    prepare_wait_ns: int = 0
    cap_wait_ns: int = 0
    connected_ns: int = 0
    sent_ns: int = 0
    cancelled: bool = False  # the client closed it as the scenario planned: not an error
    # several endpoints: the one the client sent to; behind a router: the
    # replica the response header named (and that header), and the router's
    # session token
    endpoint: str | None = None
    served_by: str | None = None
    served_by_header: str | None = None
    session: str | None = None
    request_id: str = ""
    trace_id: str = ""
    span_id: str = ""
    engine_request_id: str | None = None
    engine_queue_ms: float | None = None
    engine_prefill_ms: float | None = None
    engine_prompt_tokens: int | None = None
    # structured outputs: sent with a response_format (None: its scenario
    # sends none, False: sent unconstrained beside those that are), its schema
    # new to this load process (the engine compiles its grammar), and why the
    # answer broke its schema (None: it met it)
    constrained: bool | None = None
    schema_first: bool = False
    schema_error: str | None = None

    @property
    def ok(self) -> bool:
        """Finished, neither failed nor cancelled: only these are timed."""
        return self.error is None and not self.cancelled

    def cancel(self, end_ns: int) -> RequestRecord:
        """Mark the request cancelled by the client; keeps the chunks that arrived."""
        self.cancelled = True
        self.end_ns = end_ns
        return self

    def fail(self, kind: ErrorKind, message: str, end_ns: int) -> RequestRecord:
        """Mark the request failed; keeps whatever chunks already arrived."""
        self.error = kind
        self.error_message = message
        self.end_ns = end_ns
        return self


def reported_cached(record: RequestRecord) -> int | None:
    """The prompt tokens the server said it served from its cache, where that
    can be true; a count below 0 or above the prompt is taken as unsaid (10
    cached of a 1-token prompt made a hit rate of 1000%, -5 of 10 one of -50%)."""
    cached = record.cached_tokens
    if cached is None or cached < 0:
        return None
    if record.input_tokens is not None and cached > record.input_tokens:
        return None
    return cached
