"""The open-loop look-ahead: requests prepared ahead of their instants, in a
bounded buffer, never in the guard before the next instant, handed over in
order and never early. Real gevent, real clocks; the properties checked are
the ones its logic guarantees, whatever the machine's load."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import gevent
import pytest

from slogate.locustfiles.lookahead import (
    GUARD_MIN_NS,
    SPIN_MAX_NS,
    SPIN_SHARE,
    LookAhead,
    _sleep_until,
)

MS = 1_000_000


@dataclass
class Log:
    """What happened to each plan: when its preparation started and ended, and
    when the dispatcher received it."""

    started: dict[int, int] = field(default_factory=dict)
    prepared: dict[int, int] = field(default_factory=dict)
    taken: dict[int, int] = field(default_factory=dict)
    buffered_at_start: dict[int, int] = field(default_factory=dict)

    def in_buffer_at(self, t: int) -> list[int]:
        return [
            i for i, end in self.prepared.items() if end <= t and self.taken.get(i, 1 << 62) > t
        ]


def run(
    dues_ms: list[float],
    busy_ms: float = 0.0,
    until_ms: float = 10_000.0,
    **options: float,
) -> tuple[list[int], Log, dict[int, int], LookAhead]:
    """Iterate a look-ahead over plans ``0..n-1`` due at ``dues_ms`` from now;
    preparing burns ``busy_ms`` of CPU. Returns the order taken, the log, each
    plan's due instant and the look-ahead."""
    origin = time.perf_counter_ns() + 20 * MS
    due = {i: origin + int(d * MS) for i, d in enumerate(dues_ms)}
    log = Log()

    def prepare(i: int) -> str:
        log.started[i] = time.perf_counter_ns()
        log.buffered_at_start[i] = ahead.buffered
        spin_until = log.started[i] + int(busy_ms * MS)
        while time.perf_counter_ns() < spin_until:
            pass
        log.prepared[i] = time.perf_counter_ns()
        return f"request {i}"

    ahead = LookAhead(
        iter(range(len(dues_ms))),
        due_ns=due.__getitem__,
        prepare=prepare,
        until_ns=origin + int(until_ms * MS),
        **options,
    )
    order = []
    for item in ahead:
        i = int(item.item.split()[1])
        log.taken[i] = time.perf_counter_ns()
        assert item.due_ns == due[i]
        order.append(i)
    return order, log, due, ahead


def test_hands_over_every_plan_in_order_and_never_before_its_instant():
    order, log, due, _ = run([i * 5.0 for i in range(30)])
    assert order == list(range(30))
    assert all(log.taken[i] >= due[i] for i in order)


def test_plans_are_prepared_before_their_instants():
    order, log, due, _ = run([50.0 + i * 50.0 for i in range(8)])
    assert order == list(range(8))
    assert all(log.prepared[i] < due[i] for i in order)


def test_the_buffer_never_holds_more_than_its_capacity():
    _, log, _, _ = run([i * 2.0 for i in range(40)], capacity=3)
    assert max(log.buffered_at_start.values()) <= 2  # the one being prepared makes 3


def test_plans_beyond_the_horizon_wait_unless_nothing_is_buffered():
    horizon_ms = 60.0
    _, log, due, _ = run([i * 25.0 for i in range(16)], horizon_s=horizon_ms / 1000)
    for i, started in log.started.items():
        if log.buffered_at_start[i]:
            assert due[i] - started <= horizon_ms * MS


def test_no_preparation_starts_within_the_guard_of_the_next_instant():
    _, log, due, ahead = run([i * 100.0 for i in range(8)], busy_ms=3.0)
    assert ahead.guard_ns() >= 2 * 3 * MS
    checked = 0
    for started in log.started.values():
        waiting = log.in_buffer_at(started)
        if waiting:
            checked += 1
            assert min(due[j] for j in waiting) - started >= GUARD_MIN_NS
    assert checked  # the test exercised the guard at least once


def test_plans_due_at_the_end_or_later_are_never_prepared():
    order, log, _, _ = run([0.0, 10.0, 20.0, 30.0, 40.0], until_ms=25.0)
    assert order == [0, 1, 2]
    assert sorted(log.started) == [0, 1, 2]


def test_a_failed_preparation_is_raised_to_the_dispatcher_after_the_earlier_plans():
    def prepare(i: int) -> int:
        if i == 2:
            raise ValueError("plan 2: the engine's /tokenize failed")
        return i

    now = time.perf_counter_ns()
    ahead = LookAhead(iter(range(5)), lambda i: now + i * MS, prepare, until_ns=now + 1_000 * MS)
    taken = []
    with pytest.raises(ValueError, match="plan 2"):
        for item in ahead:
            taken.append(item.item)
    assert taken == [0, 1]


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError, match="capacity"):
        LookAhead(iter(()), int, str, until_ns=0, capacity=0)


def test_the_last_stretch_before_an_instant_keeps_the_loop_running():
    """Waiting out the spin before an instant yields to the loop: a greenlet
    woken inside that stretch runs before the wait returns, and the wait never
    returns early."""
    due = time.perf_counter_ns() + 30 * MS
    ran_at: list[int] = []
    gevent.spawn_later(0.027, lambda: ran_at.append(time.perf_counter_ns()))  # inside the spin
    _sleep_until(due, spin_ns=10 * MS)
    returned = time.perf_counter_ns()
    assert returned >= due
    assert ran_at and ran_at[0] <= returned


def test_the_spin_is_at_most_the_guard_and_a_share_of_the_gap():
    assert SPIN_MAX_NS <= GUARD_MIN_NS  # no preparation can start while it spins
    assert SPIN_SHARE >= 10  # a tenth of a core at most, at any rate of sends
