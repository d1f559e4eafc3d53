"""Every API on the wire: the streaming client against the simulated engine
serving chat, Responses and Messages (a reasoning profile, fault injection for
error events mid-stream and cut streams), and a raw local server for the
headers each API must send and what the engine never does."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from slogate.analysis.measurement.records import ErrorKind
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

TOKENS = 48
TURN = PlannedTurn("s", 0, 0, "what is the answer?", TOKENS, 8, TOKENS, system_text="be brief")
APIS = ["chat", "responses", "messages"]


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    # Qwen3-8B thinks for a median of 600 tokens: most of these requests think
    # for all but their last few tokens, which are the answer
    running = start_engine("qwen3-8b@h100", speedup=4, max_num_seqs=64)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def clean(engine: EngineProcess) -> Iterator[EngineProcess]:
    engine.clear_faults()
    yield engine
    engine.clear_faults()


def client(url: str, api: str, **options: object) -> StreamClient:
    return StreamClient(
        url,
        api,  # type: ignore[arg-type]  # a parametrized str, one of the Api literals
        "Qwen/Qwen3-8B",
        RequestOptions(ignore_eos=True, **options),  # type: ignore[arg-type]  # each its field's type
        Timeouts(first_token_s=30, stall_s=30),
        2,
    )


@pytest.mark.parametrize("api", APIS)
def test_reasoning_model_on_every_api(clean: EngineProcess, api: str) -> None:
    c = client(clean.url, api)
    try:
        result = c.send(TURN)
    finally:
        c.close()
    rec = result.record
    assert rec.ok, rec.error_message
    assert rec.output_tokens == TOKENS  # usage of every API, reasoning included
    assert rec.input_tokens and rec.input_tokens > 8
    m = request_metrics(rec)
    a = m.answer
    assert a.reasoning and a.ttfa_ns is not None
    assert a.ttfa_ns > m.ttft_ns  # thinking came first
    assert 0 < a.reasoning_tokens < TOKENS
    assert a.reasoning_tokens + a.answer_tokens == TOKENS
    if api != "messages":  # chat and Responses report the count; Messages is counted
        assert rec.reasoning_tokens == a.reasoning_tokens
    assert result.text  # the answer, without the thinking, for the history
    assert rec.finish_reason in ("length", "max_tokens")


def test_every_api_counts_the_same_prompt(clean: EngineProcess) -> None:
    """The system prompt goes where each API puts it (a chat or Responses
    ``system`` message, the Messages API's top-level ``system``); the engine
    reads it from each, so the prompt's tokens are the same."""
    counts = {}
    for api in APIS:
        c = client(clean.url, api)
        rec = c.send(TURN).record
        c.close()
        assert rec.ok, rec.error_message
        counts[api] = rec.input_tokens
    without = PlannedTurn("s", 0, 0, TURN.user_text, TOKENS, 8, TOKENS)
    c = client(clean.url, "messages")
    bare = c.send(without).record
    c.close()
    assert len(set(counts.values())) == 1, counts
    assert bare.input_tokens < counts["messages"]


@pytest.mark.parametrize("api", APIS)
def test_thinking_switched_off(clean: EngineProcess, api: str) -> None:
    off = {
        "chat": {"chat_template_kwargs": {"enable_thinking": False}},
        "responses": {"reasoning": {"effort": "none"}},
        "messages": {"thinking": {"type": "disabled"}},
    }[api]
    c = client(clean.url, api, extra_body=off)
    try:
        rec = c.send(TURN).record
    finally:
        c.close()
    assert rec.ok, rec.error_message
    assert rec.chunk_reasoning == []
    assert request_metrics(rec).answer.ttfa_ns == request_metrics(rec).ttft_ns


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("fault", "kind"),
    [("stream_error_rate", ErrorKind.STREAM_ERROR), ("stream_cut_rate", ErrorKind.TRUNCATED)],
)
def test_error_events_and_cut_streams(
    clean: EngineProcess, api: str, fault: str, kind: ErrorKind
) -> None:
    clean.set_faults(**{fault: 1.0})
    c = client(clean.url, api)
    try:
        rec = c.send(TURN).record
    finally:
        c.close()
    assert rec.error is kind, rec.error_message
    assert rec.chunk_ns  # the fault strikes mid-stream, after output
    if kind is ErrorKind.STREAM_ERROR:
        assert "fault injection" in rec.error_message


@pytest.mark.parametrize("api", APIS)
def test_http_errors_in_each_api_shape(clean: EngineProcess, api: str) -> None:
    clean.set_faults(http_429_rate=1.0)
    c = client(clean.url, api)
    try:
        rec = c.send(TURN).record
    finally:
        c.close()
    assert rec.error is ErrorKind.HTTP_429
    assert rec.error_message == "HTTP 429: simulated failure (fault injection)"


def serve_once(response: bytes) -> tuple[str, threading.Thread, list[bytes]]:
    """A raw server that answers one request with ``response`` and keeps what it got."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def run() -> None:
        conn, _ = listener.accept()
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(
            next(
                line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
            ).split(b":")[1]
        )
        while len(body) < length:
            body += conn.recv(65536)
        received.extend([head, body])
        conn.sendall(response)
        conn.close()
        listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", thread, received


def sse_response(*events: dict) -> bytes:
    body = b"".join(
        b"event: %s\ndata: %s\n\n" % (e["type"].encode(), json.dumps(e).encode()) for e in events
    )
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body


def test_messages_request_headers_and_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_KEY", "sk-ant-secret-42")
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "ok"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    url, thread, received = serve_once(sse_response(*events))
    c = client(url, "messages", api_key_env="ANTHROPIC_KEY")
    rec = c.send(TURN).record
    c.close()
    thread.join(5)
    head, body = received
    assert rec.ok, rec.error_message
    assert head.startswith(b"POST /v1/messages HTTP/1.1")
    assert b"x-api-key: sk-ant-secret-42" in head
    assert b"anthropic-version: 2023-06-01" in head
    assert b"authorization" not in head.lower()
    sent = json.loads(body)
    assert sent["system"] == "be brief"
    assert sent["messages"] == [{"role": "user", "content": TURN.user_text}]
    assert (sent["max_tokens"], sent["stream"]) == (TOKENS, True)


def test_responses_request_body() -> None:
    events = [
        {"type": "response.output_text.delta", "delta": "ok"},
        {
            "type": "response.completed",
            "response": {"usage": {"input_tokens": 3, "output_tokens": 1}},
        },
    ]
    url, thread, received = serve_once(sse_response(*events))
    c = client(url, "responses")
    rec = c.send(TURN).record
    c.close()
    thread.join(5)
    head, body = received
    assert rec.ok, rec.error_message
    assert head.startswith(b"POST /v1/responses HTTP/1.1")
    sent = json.loads(body)
    assert sent["input"][0] == {"role": "system", "content": "be brief"}
    assert (sent["max_output_tokens"], sent["stream"]) == (TOKENS, True)
    assert "max_tokens" not in sent and "stream_options" not in sent


IMAGE = "data:image/png;base64,iVBORw0KGgo="
AGENT_STEP = [  # chat's shape, as the load side keeps it: an image, two tool calls answered
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is here?"},
            {"type": "image_url", "image_url": {"url": IMAGE}},
        ],
    },
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"q": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "t", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": "noon"},
]
REPLY = {
    "responses": [
        {"type": "response.output_text.delta", "delta": "ok"},
        {"type": "response.completed", "response": {}},
    ],
    "messages": [
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "message_stop"},
    ],
}


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_agent_step_with_an_image_in_each_api_shape(api: str) -> None:
    """The conversation goes out in the API's own shapes: Responses
    ``input_image``, ``function_call`` and ``function_call_output`` items;
    Messages ``image`` blocks (base64 source), ``tool_use`` blocks and one user
    turn of ``tool_result`` blocks."""
    url, thread, received = serve_once(sse_response(*REPLY[api]))
    c = client(url, api)
    rec = c.send(TURN, AGENT_STEP).record
    c.close()
    thread.join(5)
    assert rec.ok, rec.error_message
    sent = json.loads(received[1])
    if api == "responses":
        assert sent["input"] == [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is here?"},
                    {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
                ],
            },
            {"role": "assistant", "content": "Checking."},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"q": 1}'},
            {"type": "function_call", "call_id": "c2", "name": "t", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": "noon"},
        ]
        return
    source = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is here?"},
                {"type": "image", "source": source},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "c1", "name": "w", "input": {"q": 1}},
                {"type": "tool_use", "id": "c2", "name": "t", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "noon"},
            ],
        },
    ]


# --- embeddings: not streamed ----------------------------------------------------------

BATCH = PlannedTurn("e", 0, 0, "one", 1, 30, 0, inputs=("one text", "another text", "a third"))


@pytest.fixture(scope="module")
def embedder() -> Iterator[EngineProcess]:
    running = start_engine("qwen3-embedding-0.6b@l4", speedup=4)
    try:
        yield running
    finally:
        running.stop()


def embed_client(url: str, model: str = "Qwen/Qwen3-Embedding-0.6B") -> StreamClient:
    return StreamClient(url, "embeddings", model, RequestOptions(), Timeouts(), 2)


def test_embeddings_batch_is_timed_whole(embedder: EngineProcess) -> None:
    c = embed_client(embedder.url)
    try:
        results = [c.send(BATCH) for _ in range(3)]  # keep-alive: the connection is reused
    finally:
        c.close()
    for result in results:
        rec = result.record
        assert rec.ok, rec.error_message
        assert rec.inputs == 3
        assert rec.input_tokens and rec.input_tokens >= 6
        assert rec.output_tokens == 0 and rec.chunk_ns == []
        m = request_metrics(rec)
        assert m.ttft_ns is None and m.e2e_ns > 0


def test_a_generative_model_refuses_embeddings(engine: EngineProcess) -> None:
    c = embed_client(engine.url, "Qwen/Qwen3-8B")
    try:
        rec = c.send(BATCH).record
    finally:
        c.close()
    assert rec.error is ErrorKind.HTTP_4XX
    assert "does not support embeddings" in rec.error_message


def json_response(body: bytes, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % size
    return head + body


def test_an_empty_header_value_does_not_swallow_the_next_header() -> None:
    # llama.cpp sends "Access-Control-Allow-Origin:" empty, before Content-Type
    body = b'{"data": [{"embedding": [1]}, {"embedding": [1]}, {"embedding": [1]}]}'
    response = (
        b"HTTP/1.1 200 OK\r\nServer: llama.cpp\r\nAccess-Control-Allow-Origin: \r\n"
        b"Content-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )
    url, thread, _ = serve_once(response)
    rec = embed_client(url).send(BATCH).record
    thread.join(5)
    assert rec.ok, rec.error_message


@pytest.mark.parametrize(
    ("response", "kind", "message"),
    [
        (
            json_response(b'{"data": [{"embedding": [0.1]}]}'),
            ErrorKind.PROTOCOL,
            "1 embeddings for 3",
        ),
        (json_response(b"not json"), ErrorKind.PROTOCOL, "not JSON"),
        (
            json_response(b'{"data": [{"embedding": []}, {"embedding": [1]}, {"embedding": [1]}]}'),
            ErrorKind.PROTOCOL,
            "data[0]",
        ),
        (json_response(b'{"data": [', length=100), ErrorKind.TRUNCATED, "cut"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n",
            ErrorKind.PROTOCOL,
            "application/json",
        ),
    ],
    ids=["count", "not-json", "empty-vector", "truncated", "not-json-type"],
)
def test_bad_embedding_replies(response: bytes, kind: ErrorKind, message: str) -> None:
    url, thread, received = serve_once(response)
    rec = embed_client(url).send(BATCH).record
    thread.join(5)
    assert rec.error is kind, rec.error_message
    assert message in rec.error_message
    sent = json.loads(received[1])
    assert sent["input"] == list(BATCH.inputs)
    assert received[0].startswith(b"POST /v1/embeddings HTTP/1.1")


# --- tool calls ------------------------------------------------------------------------

TOOLS = (
    {
        "name": "weather_0",
        "description": "the weather",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
)


# each API's finish reason for a tool call, and for the final answer cut at its token limit
TOOL_FINISH = {
    "chat": ("tool_calls", "length"),
    "responses": ("stop", "length"),
    "messages": ("tool_use", "max_tokens"),
}


@pytest.mark.parametrize("api", APIS)
def test_engine_tool_calls_until_the_session_has_its_answers(
    engine: EngineProcess, api: str
) -> None:
    """The engine streams tool calls in each API's wire shape, and reads the
    tool results the client sends back in each API's shape (the client keeps
    the conversation in chat's shape and each protocol translates it)."""
    called, answered = TOOL_FINISH[api]
    c = client(
        engine.url,
        api,
        tools=TOOLS,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    messages = [{"role": "user", "content": TURN.user_text}]
    calls = 0
    try:
        while True:
            result = c.send(TURN, messages)
            rec = result.record
            assert rec.ok, rec.error_message
            if not result.tool_calls:
                break
            calls += 1
            assert rec.finish_reason == called
            (call,) = result.tool_calls
            assert call["function"]["name"] == "weather_0"
            assert set(json.loads(call["function"]["arguments"])) == {"query"}
            assert rec.tool_arg_bytes == len(call["function"]["arguments"].encode())
            assert request_metrics(rec).ttftc_ns == request_metrics(rec).ttft_ns
            messages += [
                {"role": "assistant", "content": None, "tool_calls": result.tool_calls},
                {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
            ]
    finally:
        c.close()
    assert 1 <= calls <= 3  # the engine calls 1 to 3 tools per session, then answers
    assert result.text and rec.finish_reason == answered
