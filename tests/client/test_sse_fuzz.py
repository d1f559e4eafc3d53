"""The SSE parser under arbitrary bytes split at arbitrary points (hypothesis):
it never raises anything but SSEProtocolError, what it holds never passes its
bound, and the split never changes the events."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slogate.client.sse import Event, SSEParser, SSEProtocolError

BOUND = 64
# bytes rich in what the grammar reacts to, plus anything at all
SSE_BYTES = st.lists(
    st.one_of(
        st.sampled_from(
            [b"data:", b"data: ", b"\n", b"\r", b"\r\n", b":", b"event: x", b"id: 1", b"error: e"]
        ),
        st.binary(max_size=24),
    ),
    max_size=40,
).map(b"".join)


def feed_split(data: bytes, cuts: list[int], bound: int) -> tuple[list[Event], bool]:
    """The events of ``data`` fed in pieces at ``cuts``, then closed; whether the
    bound was hit. Checks the held bytes never pass the bound."""
    parser = SSEParser(max_event_bytes=bound)
    events: list[Event] = []
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    try:
        for a, b in itertools.pairwise(points):
            events += parser.feed(data[a:b])
            assert parser._held <= bound
            assert sum(map(len, parser._tail)) <= bound
        events += parser.close()
    except SSEProtocolError:
        return events, True
    return events, False


@settings(max_examples=500, deadline=None)
@given(SSE_BYTES, st.lists(st.integers(min_value=0, max_value=2000), max_size=12))
def test_any_split_of_any_bytes_gives_the_same_events_within_the_bound(
    data: bytes, cuts: list[int]
) -> None:
    whole, whole_overflow = feed_split(data, [], 1 << 30)
    split, overflow = feed_split(data, cuts, 1 << 30)
    assert (split, overflow) == (whole, whole_overflow)
    bounded, _ = feed_split(data, cuts, BOUND)
    for event in bounded:
        assert len(event.data) <= BOUND


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=4096), st.integers(min_value=1, max_value=512))
def test_a_bound_hit_is_a_protocol_error_never_another_exception(data: bytes, step: int) -> None:
    parser = SSEParser(max_event_bytes=BOUND)
    try:
        for i in range(0, len(data), step):
            parser.feed(data[i : i + step])
    except SSEProtocolError as error:
        assert "grew past 64 bytes" in str(error)
        assert not parser.pending  # reset: nothing held after the error


def test_an_event_past_the_bound_in_one_read_is_refused() -> None:
    """Two 40-byte data lines and their blank line in one read: 81 bytes of data
    against a bound of 64 (the check once ran only at the end of a read, after
    the blank line had dispatched the event)."""
    parser = SSEParser(max_event_bytes=BOUND)
    with pytest.raises(SSEProtocolError, match="grew past 64 bytes"):
        parser.feed(b"data: " + b"a" * 40 + b"\ndata: " + b"b" * 40 + b"\n\n")
    assert not parser.pending


def test_data_lines_without_a_blank_line_hit_the_bound() -> None:
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(SSEProtocolError, match="grew past 1000 bytes"):
        for _ in range(2000):
            parser.feed(b"data:\n")  # even empty ones: each is an entry held


def test_an_endless_line_hits_the_bound() -> None:
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(SSEProtocolError):
        for _ in range(1000):
            parser.feed(b": no line end")


def test_comment_lines_hold_nothing() -> None:
    parser = SSEParser(max_event_bytes=100)
    for _ in range(1000):
        assert parser.feed(b": keep-alive\n") == []
    assert parser.comments == 1000
    assert not parser.pending


def test_a_long_line_in_many_reads_is_parsed_once_not_per_read() -> None:
    """A 20 MB line in 64 KiB reads (before the fix: one copy of the whole buffer
    per read, 2.6 s). Checked by structure, not timed (bench/ times it)."""
    parser = SSEParser(max_event_bytes=32 << 20)
    piece = b"a" * 65536
    assert parser.feed(b"data: ") == []
    for _ in range(320):
        assert parser.feed(piece) == []
    assert len(parser._tail) == 321  # each read kept as it came, no buffer copied
    events = parser.feed(b"\n\n")
    assert len(events) == 1
    assert len(events[0].data) == 320 * 65536


def test_a_bytearray_stream_is_split_like_a_bytes_stream() -> None:
    data = b"data: one\r\n\r\ndata: t\xc3\xa9\n\n"
    parser = SSEParser()
    events = []
    for i in range(len(data)):
        events += parser.feed(bytearray(data[i : i + 1]))
    assert events == [Event(b"one"), Event("té".encode())]
