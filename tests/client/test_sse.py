"""The SSE parser on every line-ending, field and split case, whole and byte by byte."""

from __future__ import annotations

import pytest

from slogate.client.sse import Event, SSEParser


def parse(data: bytes, sizes: int | None = None) -> tuple[list[Event], SSEParser]:
    """Feed ``data`` whole (sizes None) or in pieces of ``sizes`` bytes."""
    parser = SSEParser()
    step = sizes or len(data) or 1
    events: list[Event] = []
    for i in range(0, len(data), step):
        events += parser.feed(data[i : i + step])
    return events, parser


def parse_every_way(data: bytes) -> list[Event]:
    """The events of ``data``, checked equal whole, one byte at a time, and split
    in two at every position."""
    whole, _ = parse(data)
    assert parse(data, 1)[0] == whole
    for cut in range(1, len(data)):
        parser = SSEParser()
        assert parser.feed(data[:cut]) + parser.feed(data[cut:]) == whole, cut
    return whole


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_gives_the_same_events(end: bytes) -> None:
    data = end.join([b"data: one", b"", b"data: two", b"data: three", b"", b""])
    assert parse_every_way(data) == [Event(b"one"), Event(b"two\nthree")]


def test_cr_ending_one_read_and_lf_starting_the_next_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    # were the LF a line of its own it would dispatch "a" alone
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r") == [Event(b"a\nb")]
    assert parser.feed(b"\n") == []  # the LF of the CRLF that dispatched


def test_data_with_or_without_one_space() -> None:
    data = b"data:x\n\ndata: x\n\ndata:  x\n\n"
    assert parse_every_way(data) == [Event(b"x"), Event(b"x"), Event(b" x")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    data = b'data: {"a":\ndata: 1}\n\n'
    assert parse_every_way(data) == [Event(b'{"a":\n1}')]


def test_comments_are_counted_and_never_dispatched() -> None:
    data = b": keep-alive\n\n:\n\ndata: x\n: between\n\n"
    events = parse_every_way(data)
    assert events == [Event(b"x")]
    assert parse(data)[1].comments == 3


def test_event_id_and_retry_fields() -> None:
    data = b"event: ping\nid: 7\nretry: 3000\ndata: x\n\ndata: y\n\n"
    first, second = parse_every_way(data)
    assert first == Event(b"x", event="ping", id="7", retry=3000)
    # the event type is per event; id and retry persist, as the standard says
    assert second == Event(b"y", event=None, id="7", retry=3000)


def test_bad_retry_and_id_with_nul_are_ignored() -> None:
    events, parser = parse(b"id: 1\n\nretry: soon\nid: a\0b\ndata: x\n\n")
    assert events == [Event(b"x", id="1")]
    assert parser.retry is None


def test_event_without_data_is_not_dispatched_and_its_type_does_not_leak() -> None:
    data = b"event: lonely\n\ndata: x\n\n"
    assert parse_every_way(data) == [Event(b"x")]


def test_field_without_colon_and_unknown_fields() -> None:
    data = b"data\n\nfoo: bar\ndata: x\n\n"
    assert parse_every_way(data) == [Event(b""), Event(b"x")]


def test_legacy_error_field_dispatches_an_error_event() -> None:
    data = b'error: {"message": "boom"}\n\n'
    assert parse_every_way(data) == [Event(b"", error='{"message": "boom"}')]


def test_utf8_character_split_across_reads_survives() -> None:
    text = "data: 日本語 🙂\n\n".encode()
    events = parse_every_way(text)  # includes every cut inside the multi-byte characters
    assert [e.data.decode() for e in events] == ["日本語 🙂"]


def test_utf8_in_other_fields_split_across_reads() -> None:
    data = "event: café\ndata: x\n\n".encode()
    assert parse_every_way(data) == [Event(b"x", event="café")]


def test_several_events_in_one_read() -> None:
    data = b"data: 1\n\ndata: 2\n\n: ping\n\ndata: 3\n\n"
    assert [e.data for e in parse(data)[0]] == [b"1", b"2", b"3"]


def test_close_dispatches_a_complete_event_missing_its_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: [DONE]\n") == []
    assert parser.pending
    assert parser.close() == [Event(b"[DONE]")]
    assert not parser.pending


def test_close_drops_an_unfinished_line() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"choices": [') == []
    assert parser.close() == []


def test_bytearray_input_gives_the_same_events() -> None:
    data = b"data: a\r\n\r\ndata: b\n\n"
    parser = SSEParser()
    events = parser.feed(bytearray(data))
    assert [bytes(e.data) for e in events] == [b"a", b"b"]
