"""Tool calls in every streamed protocol: assembled from their deltas, the first
tool-call chunk timed (TTFTC), argument bytes counted, then recorded."""

from __future__ import annotations

import json

import pytest
from streams import interpret, sse

from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client import messages_stream, responses_stream

ARGS = '{"city": "Zürich"}'  # a multi-byte character: bytes, not characters, are counted


def chat_call(index: int, call_id: str | None, name: str | None, arguments: str) -> dict:
    function = {"arguments": arguments}
    if name:
        function["name"] = name
    call = {"index": index, "function": function}
    if call_id:
        call.update(id=call_id, type="function")
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


CHAT = sse(
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"content": "Let me check."}}]},
    chat_call(0, "call_a", "weather", ""),
    chat_call(0, None, None, ARGS[:9]),
    chat_call(0, None, None, ARGS[9:]),
    chat_call(1, "call_b", "time", "{}"),
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    b"[DONE]",
)
RESPONSES = sse(
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message"}},
    {"type": "response.output_text.delta", "output_index": 0, "delta": "Let me check."},
    {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {"type": "function_call", "call_id": "call_a", "name": "weather"},
    },
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": ARGS[:9]},
    {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": ARGS[9:]},
    {
        "type": "response.output_item.added",
        "output_index": 2,
        "item": {"type": "function_call", "call_id": "call_b", "name": "time"},
    },
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{}"},
    {"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 9}}},
    event=True,
)
MESSAGES = sse(
    {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "Let me check."},
    },
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "call_a", "name": "weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": ARGS[:9]},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": ARGS[9:]},
    },
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "call_b", "name": "time", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": "{}"},
    },
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
    event=True,
)


@pytest.mark.parametrize(
    ("stream", "parse"),
    [
        (CHAT, None),
        (RESPONSES, responses_stream.parse_event),
        (MESSAGES, messages_stream.parse_event),
    ],
    ids=["chat", "responses", "messages"],
)
@pytest.mark.parametrize("piece", [1, 11, 100_000])
def test_tool_calls_are_assembled_timed_and_counted(stream: bytes, parse, piece: int) -> None:
    rec, interp = interpret(stream, piece) if parse is None else interpret(stream, piece, parse)
    assert rec.ok, rec.error_message
    calls = interp.tool_calls
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("call_a", "weather"),
        ("call_b", "time"),
    ]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Zürich"}
    assert rec.tool_calls == 2
    assert rec.tool_arg_bytes == len(ARGS.encode()) + 2
    assert interp.text == "Let me check."
    assert rec.tool_call_ns == rec.chunk_ns[1]  # the chunk after the text
    m = request_metrics(rec)
    assert m.ttftc_ns == rec.chunk_ns[1] - rec.start_ns
    assert m.answer.ttfa_ns == m.ttft_ns  # text first; a tool call is answer output too


def test_recorder_keeps_tool_call_latency_and_argument_bytes() -> None:
    rec, _ = interpret(CHAT, 7)
    recorder = Recorder()
    recorder.record(rec, wall_s=1.0)
    plain, _ = interpret(
        sse(
            {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]},
            b"[DONE]",
        ),
        7,
    )
    recorder.record(plain, wall_s=1.0)
    bucket = recorder.bucket("s", "all")
    assert (bucket.counters.tool_call_requests, bucket.counters.tool_calls) == (1, 2)
    h = bucket.histograms
    assert h.histogram("ttftc").get_total_count() == 1
    assert h.histogram("tool_arg_bytes").get_max_value() == len(ARGS.encode()) + 2
