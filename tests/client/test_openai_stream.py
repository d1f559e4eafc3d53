"""OpenAI stream events classified and applied to a record, whole and byte by byte.

``interpret`` feeds a stream through the SSE parser and the interpreter, giving
every byte's index as its arrival instant: a chunk's time must then be the index
of the byte that completed its event (its blank line), whatever the split.
"""

from __future__ import annotations

import json

import orjson
import pytest
from streams import interpret

from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.client.openai_stream import (
    Chunk,
    ChunkKind,
    as_chunk,
    chat_body,
    chunk_object,
    completions_body,
    parse_chunk,
    speculation_counts,
)
from slogate.scenarios.model import PlannedTurn, RequestOptions


def classify(data: bytes) -> Chunk:
    return as_chunk(parse_chunk(data))


def event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chat(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    obj: dict = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return event(obj)


def usage(completion: int, prompt: int = 7) -> dict:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


USAGE_CHUNK = event({"choices": [], "usage": usage(3)})
DONE = b"data: [DONE]\n\n"


def interpret_both_ways(stream: bytes) -> tuple[RequestRecord, str]:
    """The record whole and byte by byte: the same but for times, which must be
    the completing byte's index when fed byte by byte."""
    whole, interpreter = interpret(stream, len(stream))
    by_byte, by_byte_interpreter = interpret(stream, 1)
    for field in (
        "chunk_chars",
        "chunk_tokens",
        "output_tokens",
        "input_tokens",
        "finish_reason",
        "error",
    ):
        assert getattr(whole, field) == getattr(by_byte, field), field
    assert interpreter.text == by_byte_interpreter.text
    return by_byte, by_byte_interpreter.text


def ends(stream: bytes, *events: bytes) -> list[int]:
    """Index of the last byte of each of ``events`` (in order) within ``stream``."""
    out, start = [], 0
    for piece in events:
        position = stream.index(piece, start)
        out.append(position + len(piece) - 1)
        start = position + len(piece)
    return out


# ---- classification of single events


@pytest.mark.parametrize(
    ("delta", "kind", "chars", "text"),
    [
        ({"role": "assistant", "content": ""}, ChunkKind.EMPTY, 0, ""),
        ({"role": "assistant"}, ChunkKind.EMPTY, 0, ""),
        ({}, ChunkKind.EMPTY, 0, ""),
        ({"content": None}, ChunkKind.EMPTY, 0, ""),
        ({"content": "Hello"}, ChunkKind.OUTPUT, 5, "Hello"),
        ({"role": "assistant", "content": "Hi"}, ChunkKind.OUTPUT, 2, "Hi"),  # TGI
        ({"reasoning_content": "think"}, ChunkKind.OUTPUT, 5, ""),
        ({"reasoning": "hmm", "content": ""}, ChunkKind.OUTPUT, 3, ""),
        ({"content": "ab", "reasoning_content": "cd"}, ChunkKind.OUTPUT, 4, "ab"),
        (
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c",
                        "type": "function",
                        "function": {"name": "get", "arguments": '{"a'},
                    }
                ]
            },
            ChunkKind.OUTPUT,
            6,
            "",
        ),
        ({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}, ChunkKind.EMPTY, 0, ""),
    ],
)
def test_chat_deltas(delta: dict, kind: ChunkKind, chars: int, text: str) -> None:
    chunk = classify(chat(delta)[6:-2])
    assert (chunk.kind, chunk.chars, chunk.text) == (kind, chars, text)


CHUNK_FIELDS = (
    "kind", "chars", "text", "finish_reason", "completion_tokens", "prompt_tokens", "message",
    "reasoning", "reasoning_tokens", "tools",
)  # fmt: skip


@pytest.mark.parametrize(
    "obj",
    [
        {"choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "x"}}], "id": "c", "model": "m"},
        {"choices": [{"index": 0, "text": " world", "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "é\n"}, "logprobs": None}]},
        {"choices": [{"index": 0, "delta": {"content": ""}}]},
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]},
        {"choices": [{"index": 0, "delta": {"content": "hi", "reasoning_content": None}}]},
        {"choices": [{"index": 0, "delta": {"reasoning": "hm"}}]},
        {"choices": [{"index": 0, "delta": {"content": "end"}, "finish_reason": "stop"}]},
        {"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": {"completion_tokens": 3}},
        {"choices": [{"index": 0, "delta": {"content": "a"}}], "usage": None},
        {"choices": [{"index": 0, "delta": {"content": "a"}}], "error": {"message": "boom"}},
        {"choices": [{"delta": {"content": "a"}}, {"delta": {"content": "b"}}]},
        {"choices": [{"index": 0, "delta": {"content": 5}}]},
        {"choices": [{"index": 0, "delta": "content"}]},
        {"choices": ["not a choice"]},
        {"choices": []},
        {"choices": {"0": {"delta": {"content": "a"}}}},
    ],
)
def test_the_plain_text_shortcut_reads_every_chunk_as_the_general_reading(obj: dict) -> None:
    """Whether parse_chunk returns the bare text or a Chunk, the chunk is the one
    the general reading makes of it: every field the same."""
    data = json.dumps(obj).encode()
    fast, general = as_chunk(parse_chunk(data)), chunk_object(obj, data)
    assert [getattr(fast, f) for f in CHUNK_FIELDS] == [getattr(general, f) for f in CHUNK_FIELDS]


def test_the_usual_chunks_take_the_plain_text_shortcut() -> None:
    """vLLM's and completions' text chunks come back as their bare text (the hot path)."""
    assert parse_chunk(chat({"content": " word"})[6:-2]) == " word"
    completion = {"choices": [{"index": 0, "text": " w", "finish_reason": None}]}
    assert parse_chunk(json.dumps(completion).encode()) == " w"


def test_completions_text_chunk_is_output() -> None:
    chunk = classify(
        json.dumps({"choices": [{"index": 0, "text": " world", "finish_reason": None}]}).encode()
    )
    assert (chunk.kind, chunk.chars, chunk.text) == (ChunkKind.OUTPUT, 6, " world")


def test_finish_reason_in_an_empty_delta_sglang_style() -> None:
    chunk = classify(chat({}, finish="stop")[6:-2])
    assert (chunk.kind, chunk.finish_reason) == (ChunkKind.EMPTY, "stop")


def test_usage_chunk_with_empty_choices() -> None:
    chunk = classify(USAGE_CHUNK[6:-2])
    assert (chunk.kind, chunk.completion_tokens, chunk.prompt_tokens) == (ChunkKind.EMPTY, 3, 7)


def test_several_choices_add_up() -> None:
    data = json.dumps(
        {
            "choices": [
                {"index": 0, "delta": {"content": "ab"}},
                {"index": 1, "delta": {"content": "c"}},
            ]
        }
    ).encode()
    chunk = classify(data)
    assert (chunk.kind, chunk.chars, chunk.text) == (ChunkKind.OUTPUT, 3, "abc")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"error": {"message": "out of memory", "type": "server_error"}}', "out of memory"),
        (b'{"error": "queue full"}', "queue full"),
        (b'{"error": {"code": 500}}', '{"code":500}'),
    ],
)
def test_error_objects(data: bytes, message: str) -> None:
    chunk = classify(data)
    assert (chunk.kind, chunk.message) == (ChunkKind.ERROR, message)


@pytest.mark.parametrize(
    "data",
    [
        b'{"choices": [{"delta": {"content": "x"',
        b"[1, 2]",
        b'{"choices": 3}',
        b'{"choices": [7]}',
        b"\xff",
    ],
)
def test_malformed_chunks(data: bytes) -> None:
    chunk = classify(data)
    assert chunk.kind is ChunkKind.MALFORMED
    assert chunk.message


def test_done_sentinel() -> None:
    assert classify(b"[DONE]").kind is ChunkKind.DONE


# ---- whole streams applied to a record


def test_vllm_stream_role_chunk_never_counts_and_usage_is_exact() -> None:
    pieces = [
        chat({"role": "assistant", "content": ""}),
        chat({"content": "Hel"}),
        chat({"content": "lo"}),
        chat({"content": "!"}, finish="stop"),
        USAGE_CHUNK,
        DONE,
    ]
    stream = b"".join(pieces)
    record, text = interpret_both_ways(stream)
    assert record.ok
    assert record.chunk_ns == ends(stream, *pieces[1:4])
    assert record.chunk_chars == [3, 2, 1]
    assert record.chunk_tokens == []  # no per-chunk usage
    assert (record.output_tokens, record.input_tokens, record.finish_reason) == (3, 7, "stop")
    assert record.end_ns == ends(stream, DONE)[0]
    assert text == "Hello!"


def test_tgi_role_on_every_chunk_still_times_the_first_token() -> None:
    pieces = [
        chat({"role": "assistant", "content": "A"}),
        chat({"role": "assistant", "content": "B"}, "length"),
    ]
    stream = b"".join(pieces) + DONE
    record, text = interpret_both_ways(stream)
    assert record.ok
    assert record.chunk_ns == ends(stream, *pieces)
    assert text == "AB"


def test_continuous_usage_gives_exact_tokens_per_chunk() -> None:
    pieces = [
        chat({"role": "assistant", "content": ""}, usage=usage(0)),
        chat({"content": "a"}, usage=usage(1)),
        chat({"content": "bcd"}, usage=usage(4)),  # three tokens in one chunk
        chat({}, usage=usage(5)),  # a token with no text: carried to the next output
        chat({"content": "e"}, finish="stop", usage=usage(6)),
    ]
    record, _ = interpret_both_ways(
        b"".join(pieces) + event({"choices": [], "usage": usage(6)}) + DONE
    )
    assert record.chunk_tokens == [1, 3, 2]
    assert record.output_tokens == 6


def test_per_chunk_usage_missing_on_one_output_chunk_drops_them_all() -> None:
    pieces = [
        chat({"content": "a"}, usage=usage(1)),
        chat({"content": "b"}),
        chat({"content": "c"}, "stop", usage(3)),
    ]
    record, _ = interpret_both_ways(b"".join(pieces) + DONE)
    assert record.chunk_tokens == []
    assert record.output_tokens == 3


def test_completions_stream() -> None:
    pieces = [
        event({"choices": [{"index": 0, "text": "Once", "finish_reason": None}]}),
        event({"choices": [{"index": 0, "text": " upon", "finish_reason": "length"}]}),
    ]
    stream = b"".join(pieces) + USAGE_CHUNK + DONE
    record, text = interpret_both_ways(stream)
    assert record.ok
    assert record.chunk_ns == ends(stream, *pieces)
    assert (text, record.chunk_chars, record.finish_reason) == ("Once upon", [4, 5], "length")


@pytest.mark.parametrize("done_after", [True, False])
def test_error_event_inside_the_stream_fails_it(done_after: bool) -> None:
    error = event({"error": {"message": "KV cache exhausted", "type": "server_error"}})
    stream = chat({"content": "a"}) + error + (DONE if done_after else b"")
    record, _ = interpret_both_ways(stream)
    assert record.error is ErrorKind.STREAM_ERROR
    assert record.error_message == "KV cache exhausted"
    assert record.end_ns == ends(stream, error)[0]
    assert len(record.chunk_ns) == 1  # what arrived before the error is kept


def test_legacy_error_field_fails_the_stream() -> None:
    record, _ = interpret_both_ways(
        chat({"content": "a"}) + b'error: {"content": "slot unavailable"}\n\n'
    )
    assert record.error is ErrorKind.STREAM_ERROR
    assert "slot unavailable" in record.error_message


def test_error_event_type_fails_the_stream() -> None:
    record, _ = interpret_both_ways(
        chat({"content": "a"}) + b'event: error\ndata: {"message": "boom"}\n\n'
    )
    assert record.error is ErrorKind.STREAM_ERROR
    assert "boom" in record.error_message


def test_malformed_json_is_a_protocol_error() -> None:
    stream = (
        chat({"content": "a"})
        + b'data: {"choices": [{"delta": \n\n'
        + chat({"content": "b"})
        + DONE
    )
    record, _ = interpret_both_ways(stream)
    assert record.error is ErrorKind.PROTOCOL
    assert len(record.chunk_ns) == 1


def test_stream_closing_without_done_or_finish_is_truncated() -> None:
    stream = chat({"content": "a"}) + chat({"content": "b"})
    record, _ = interpret_both_ways(stream)
    assert record.error is ErrorKind.TRUNCATED
    assert record.end_ns == len(stream)
    assert len(record.chunk_ns) == 2


def test_close_after_finish_reason_without_done_is_a_normal_end() -> None:
    stream = chat({"content": "a"}) + chat({}, finish="stop") + USAGE_CHUNK
    record, _ = interpret_both_ways(stream)
    assert record.ok
    assert record.end_ns == len(stream)
    assert record.output_tokens == 3


def test_final_event_missing_its_blank_line_still_counts() -> None:
    record, _ = interpret_both_ways(chat({"content": "a"}, "stop") + b"data: [DONE]\n")
    assert record.ok


def test_keepalive_comments_and_split_utf8_text() -> None:
    stream = (
        b": ping\n\n"
        + chat({"content": "日本"})
        + b": ping\n\n"
        + chat({"content": "🙂"}, "stop")
        + DONE
    )
    record, text = interpret_both_ways(stream)
    assert record.ok
    assert text == "日本🙂"
    assert record.chunk_chars == [2, 1]


@pytest.mark.parametrize("body", [chat_body, completions_body])
def test_per_chunk_usage_is_asked_only_once_settled_on(body) -> None:
    """``continuous_usage: auto`` not yet settled for an engine asks for the
    final usage only: a server that does not know the per-chunk field may
    refuse the request."""
    turn = PlannedTurn("a", 0, 0, "hello there", 4, 4, 4)
    asked = {
        setting: body("m", turn, None, RequestOptions(continuous_usage=setting))["stream_options"]
        for setting in ("auto", True, False)
    }
    assert asked["auto"] == asked[False] == {"include_usage": True}
    assert asked[True] == {"include_usage": True, "continuous_usage_stats": True}


def test_llamacpp_timings_fill_the_record_and_bad_counts_are_unsaid() -> None:
    final = orjson.dumps(
        {
            "choices": [],
            "usage": {"completion_tokens": 100, "prompt_tokens": 42},
            "timings": {"predicted_n": 100, "draft_n": 79, "draft_n_accepted": 61},
        }
    )
    chunk = parse_chunk(final)
    assert not isinstance(chunk, str) and chunk.drafts == (79, 61)
    assert speculation_counts({"draft_n": 5, "draft_n_accepted": 6}) is None  # more than drafted
    assert speculation_counts({"draft_n": -1, "draft_n_accepted": 0}) is None
    assert speculation_counts({"draft_n": 5.0, "draft_n_accepted": 1}) is None
    assert speculation_counts({"predicted_n": 100}) is None
    assert speculation_counts("79") is None
