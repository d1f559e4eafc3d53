"""Bookkeeping in the gaps between open-loop instants, never across one.

A generator's own CPU-bound work runs on the same event loop as its
dispatchers, and a greenlet that runs 0.75 ms makes any instant inside those
0.75 ms late by the rest. Recording a finished request (its histograms, its
windows, its timeline row) takes that long here, and up to 8 ms when it opens
a new window; a once-a-second housekeeping stretch takes 0.7 to 5 ms. Run
whenever a request ends, that work lands inside the next burst at random and
is the generator's lag (docs/load.md, "Open loop").

:class:`Clearance` is where such work waits for its turn: each kind of work
remembers how long it took the last few times, and before it runs again it
waits until no look-ahead of the process (:class:`~slogate.locustfiles.lookahead.LookAhead`)
has an instant due within its guard plus that cost, nor a request handed
over that has not begun its write. It waits at most ``WAIT_MAX_NS``: a
schedule too dense for any gap still gets its bookkeeping done, and then
the lag it causes is measured and named as it is today. A process with no
look-ahead (closed loop, the master) never waits.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

import gevent
from gevent.lock import Semaphore

__all__ = ["Clearance"]

RECENT = 16  # stretches of each kind whose longest is the next one's expected cost
WAIT_MAX_NS = 20_000_000
TURN_S = 0.0001  # a step's yield: a timer, so reads are polled first


class Instants(Protocol):
    """What a clearance asks a look-ahead."""

    def clear_in_ns(self, cost_ns: int) -> int:
        """How long work of ``cost_ns`` must wait not to delay an instant (0: now)."""
        ...


class Clearance:
    """The process's look-aheads, and the recent cost of each kind of
    bookkeeping that waits for a gap between their instants."""

    def __init__(self) -> None:
        self._instants: set[Instants] = set()
        self._turn = Semaphore()
        self._costs: defaultdict[str, deque[int]] = defaultdict(lambda: deque(maxlen=RECENT))

    def watch(self, instants: Instants) -> None:
        self._instants.add(instants)

    def forget(self, instants: Instants) -> None:
        self._instants.discard(instants)

    def cost_ns(self, kind: str) -> int:
        """The longest of the recent stretches of ``kind`` (0 before the first)."""
        return max(self._costs[kind], default=0)

    def wait(self, cost_ns: int) -> None:
        """Return once work of ``cost_ns`` started now delays no instant, or
        after ``WAIT_MAX_NS``. One waiter at a time looks (the others queue
        behind it), so a burst's worth of finished requests does not wake
        the loop once each while the burst is being sent."""
        if not self._instants:
            return
        deadline = time.perf_counter_ns() + WAIT_MAX_NS
        with self._turn:
            while self._instants:
                delay_ns = max(instants.clear_in_ns(cost_ns) for instants in self._instants)
                left_ns = deadline - time.perf_counter_ns()
                if delay_ns <= 0 or left_ns <= 0:
                    return
                gevent.sleep(min(delay_ns, left_ns) / 1e9)

    @contextmanager
    def clear(self, kind: str) -> Iterator[None]:
        """Wait for a gap that fits ``kind``'s recent cost, then time this
        stretch of it (the block must not yield: what it times is its cost).
        Stopped while it waits (the run ends), the work is still done, then
        the stop goes on: a finished request is recorded, never lost."""
        stopped: gevent.GreenletExit | None = None
        try:
            self.wait(self.cost_ns(kind))
        except gevent.GreenletExit as stop:
            stopped = stop
        started = time.perf_counter_ns()
        try:
            yield
        finally:
            self.spent(kind, time.perf_counter_ns() - started)
        if stopped is not None:
            raise stopped

    def steps(self, kind: str) -> Steps:
        """One long task of ``kind`` done in steps (a journal flush), each
        waiting for a gap that fits the longest recent step."""
        return Steps(self, kind)

    def spent(self, kind: str, cost_ns: int) -> None:
        self._costs[kind].append(cost_ns)


class Steps:
    """Call it between two steps of a task: it times the step just done,
    yields one turn of the loop (``TURN_S``, a timer, so reads are polled
    first, unlike ``gevent.sleep(0)``) and waits for a gap that fits the next; :meth:`done`
    times the last. The first step waits as the task starts."""

    def __init__(self, clearance: Clearance, kind: str) -> None:
        self._clearance = clearance
        self._kind = kind
        clearance.wait(clearance.cost_ns(kind))
        self._resumed = time.perf_counter_ns()

    def __call__(self) -> None:
        self.done()
        gevent.sleep(TURN_S)
        self._clearance.wait(self._clearance.cost_ns(self._kind))
        self._resumed = time.perf_counter_ns()

    def done(self) -> None:
        self._clearance.spent(self._kind, time.perf_counter_ns() - self._resumed)
