"""A blocking call bounded as a whole: its result or its error within the time,
a TimeoutError after it, and a late result handed over to be closed."""

from __future__ import annotations

import threading
import time

import pytest

from slogate.client.deadline import within


def test_a_call_that_ends_in_time_gives_its_result_and_nothing_is_late() -> None:
    late: list[str] = []
    assert within(lambda: "answer", 5.0, late.append) == "answer"
    assert late == []


def test_what_the_call_raised_in_time_is_raised_in_the_callers_thread() -> None:
    def refused() -> str:
        raise ConnectionRefusedError("no listener")

    with pytest.raises(ConnectionRefusedError, match="no listener"):
        within(refused, 5.0, lambda _: None)


def test_a_call_that_trickles_past_its_time_is_cut_off_and_its_result_handed_over() -> None:
    """A server sending its head a byte at a time meets every read's timeout;
    the bound is on the whole call, and the answer that comes later is closed."""
    released, late = threading.Event(), []
    handed = threading.Event()

    def trickle() -> str:
        released.wait(10)
        return "late answer"

    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no answer within 0\.2 s as a whole"):
        within(trickle, 0.2, lambda result: (late.append(result), handed.set()))
    assert time.monotonic() - started < 5
    released.set()
    assert handed.wait(10)
    assert late == ["late answer"]


def test_an_error_after_the_deadline_is_dropped_not_raised_later() -> None:
    released = threading.Event()

    def fails_late() -> str:
        released.wait(10)
        raise OSError("reset by peer")

    with pytest.raises(TimeoutError):
        within(fails_late, 0.1, lambda _: None)
    released.set()
    assert within(lambda: 1, 5.0, lambda _: None) == 1  # the next call is unaffected
