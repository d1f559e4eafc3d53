"""The template read of plain text events: exactly what the general reading
(SSE, JSON, the chunk's shape) makes of them, or no answer."""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import interpret

from slogate.analysis.measurement.records import RequestRecord
from slogate.client.chunk_template import ChunkTemplate, learn_template
from slogate.client.openai_stream import StreamInterpreter, parse_chunk
from slogate.client.sse import MAX_EVENT_BYTES, SSEParser


def vllm_event(text: str, finish: str | None = None, ascii_only: bool = False) -> bytes:
    chunk = {
        "id": "chatcmpl-7",
        "object": "chat.completion.chunk",
        "created": 1764600000,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk, ensure_ascii=ascii_only).encode() + b"\n\n"


def learnt(text: str = "Hello") -> ChunkTemplate:
    template = learn_template(vllm_event(text), text, parse_chunk, MAX_EVENT_BYTES)
    assert template is not None
    return template


def test_a_template_reads_the_text_of_the_streams_next_events() -> None:
    template = learnt()
    assert template.text_of(vllm_event(" world"), MAX_EVENT_BYTES) == " world"
    assert template.text_of(vllm_event("é, 日本, 🙂 }],{"), MAX_EVENT_BYTES) == "é, 日本, 🙂 }],{"


def test_anything_json_reads_specially_misses_the_template() -> None:
    template = learnt()
    for text in ('say "hi"', "back\\slash", "new\nline", "tab\t", "", "\x00"):
        assert template.text_of(vllm_event(text), MAX_EVENT_BYTES) is None, text
    assert template.text_of(vllm_event("é", ascii_only=True), MAX_EVENT_BYTES) is None
    assert template.text_of(vllm_event("end", finish="stop"), MAX_EVENT_BYTES) is None
    bad_utf8 = vllm_event("ab").replace(b"ab", b"a\xff")
    assert template.text_of(bad_utf8, MAX_EVENT_BYTES) is None
    assert template.text_of(vllm_event("x" * 100), 50) is None


def test_no_template_from_a_text_written_with_escapes_or_a_probe_read_otherwise() -> None:
    escaped = vllm_event("é", ascii_only=True)
    assert learn_template(escaped, "é", parse_chunk, MAX_EVENT_BYTES) is None
    assert learn_template(vllm_event('a"b'), 'a"b', parse_chunk, MAX_EVENT_BYTES) is None
    # the last place the text's bytes stand is the model's name, not the text: the
    # probe put there is not read as the text, so nothing is learnt
    named = b'data: {"choices":[{"delta":{"content":"Hi"}}],"model":"Hi"}\n\n'
    assert learn_template(named, "Hi", parse_chunk, MAX_EVENT_BYTES) is None


def events_of(stream: bytes) -> list[bytes]:
    return [event + b"\n\n" for event in stream.split(b"\n\n")[:-1]]


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=12),
    ascii_only=st.booleans(),
    created=st.sampled_from([None, 1, 2]),
)
def test_event_by_event_equals_byte_by_byte(
    texts: list[str], ascii_only: bool, created: int | None
) -> None:
    """A stream read one event per read (the template path once learnt) gives the
    record and text that reading it byte by byte (never the template) gives;
    ``created`` changing per event makes every template miss."""
    events = []
    for i, text in enumerate(texts):
        event = vllm_event(text, ascii_only=ascii_only)
        if created is not None:
            event = event.replace(b'"created": 1764600000', b'"created": %d' % (i * created))
        events.append(event)
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(texts)}}
    stream = b"".join(events) + b"data: " + orjson.dumps(usage) + b"\n\ndata: [DONE]\n\n"
    by_byte, by_byte_interpreter = interpret(stream, 1)
    record = RequestRecord(scenario="s", start_ns=0)
    interpreter = StreamInterpreter(record)
    parser = SSEParser()
    position = 0
    for event in events_of(stream):
        position += len(event)
        if interpreter.on_piece(parser, event, position - 1):
            break
    for field in ("chunk_ns", "chunk_chars", "chunk_tokens", "output_tokens", "error", "end_ns"):
        assert getattr(record, field) == getattr(by_byte, field), field
    assert interpreter.text == by_byte_interpreter.text == "".join(texts)
