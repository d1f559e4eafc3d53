"""The exact server's timer: a timerfd on CLOCK_MONOTONIC (perf_counter_ns's
clock) that becomes readable at the absolute instant it was armed for."""

from __future__ import annotations

import select
import time

from slogate.exactengine.clock import TimerFd


def readable(fd: int, timeout_s: float) -> bool:
    return bool(select.select([fd], [], [], timeout_s)[0])


def test_the_timer_wakes_at_the_armed_instant_not_before() -> None:
    timer = TimerFd()
    try:
        at = time.perf_counter_ns() + 50_000_000  # 50 ms ahead, on the client's clock
        timer.arm(at)
        assert not readable(timer.fd, 0.0)
        assert readable(timer.fd, 5.0)
        assert time.perf_counter_ns() >= at  # never early: the same clock as the client's
        timer.clear()
        assert not readable(timer.fd, 0.0)
        timer.clear()  # nothing to read: no error
    finally:
        timer.close()


def test_an_instant_in_the_past_fires_at_once_and_zero_still_arms() -> None:
    timer = TimerFd()
    try:
        timer.arm(time.perf_counter_ns() - 1_000_000)
        assert readable(timer.fd, 1.0)
        timer.clear()
        timer.arm(0)  # would disarm the timerfd: armed for 1 ns instead
        assert readable(timer.fd, 1.0)
    finally:
        timer.close()
