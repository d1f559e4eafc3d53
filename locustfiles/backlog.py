"""Arrivals held back: the open-loop schedule against what the dispatcher has sent.

An open-loop dispatcher starts each arrival into a pool bounded by
``load.max_in_flight``. Once an engine slower than the offered rate fills that
pool, the requests in flight stay at the cap and the arrivals due after them
wait in the dispatcher: the queue goes on growing, but in the schedule, not
on the wire. Two numbers keep it visible. :class:`Backlog` counts the arrivals
whose instant has passed and that the dispatcher has not yet handed to a send
(the saturation check adds them to the requests in flight:
``slogate.analysis.verdict.saturation``). :class:`HeldTime` keeps the dispatcher's
waits for a free slot, so a request's lag can say how much of it the cap held
(its ``cap`` part, ``slogate.analysis.measurement.request_metrics.LagParts``): that lag is
the engine's queue, not the load generator's fault.

No Locust or gevent here: plain arithmetic on instants, unit-tested as such.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator

# HeldTime drops the waits it no longer needs in batches, not one by one.
COMPACT_AT = 1024


class Backlog:
    """The arrivals due and not yet dispatched, counted from the schedule itself.

    ``offsets`` are the arrival instants in seconds from the schedule's start,
    in order: the same instants the dispatcher sends (a second, identically
    seeded draw of them, so counting needs no request built); ``origin_ns``
    gives the schedule's start (0 until it started); ``dropped`` how many
    arrivals the planner left out so far (``--fit-context drop``: never sent,
    so never held). A planner decides a drop when it builds the request, up
    to the look-ahead's horizon before its instant: those decided ahead are
    taken off early, which only ever undercounts, by a few."""

    __slots__ = ("_dropped", "_next_s", "_offsets", "_origin_ns", "dispatched", "due", "waiting")

    def __init__(
        self,
        offsets: Iterator[float],
        origin_ns: Callable[[], int],
        dropped: Callable[[], int] = lambda: 0,
    ) -> None:
        self._offsets = offsets
        self._origin_ns = origin_ns
        self._dropped = dropped
        self._next_s: float | None = next(offsets, None)
        self.due = 0  # arrivals whose instant has passed
        self.dispatched = 0
        # the instant of the arrival the dispatcher waits to find a slot for (0: none)
        self.waiting = 0

    def held(self, now_ns: int) -> int:
        """Arrivals whose instant is at or before ``now_ns`` (``perf_counter_ns``)
        and which have not been dispatched nor dropped."""
        origin = self._origin_ns()
        if origin == 0:
            return 0
        now_s = (now_ns - origin) / 1e9
        while self._next_s is not None and self._next_s <= now_s:
            self.due += 1
            self._next_s = next(self._offsets, None)
        return max(0, self.due - self.dispatched - self._dropped())

    def waited_ms(self, now_ns: int) -> float:
        """How long the oldest arrival held back at the cap has waited at
        ``now_ns``: its TTFT from the schedule will be at least that, while
        the requests that finish lag behind by their whole time in flight."""
        return max(0, now_ns - self.waiting) / 1e6 if self.waiting else 0.0


class HeldTime:
    """The dispatcher's waits for a free slot under the in-flight cap, as
    intervals of ``perf_counter_ns``, and how much of any span they cover.

    The dispatcher takes arrivals in schedule order and waits for one at a
    time, so a late arrival's lag can hold the waits for the arrivals before
    it as well as its own: all of that is the cap's. :meth:`within` answers
    for a span ``[scheduled, now]``; waits that ended before the oldest
    instant still asked about are dropped (:meth:`forget_before`)."""

    __slots__ = ("_begins", "_ends", "_first", "_held_before")

    def __init__(self) -> None:
        self._begins: list[int] = []
        self._ends: list[int] = []
        self._held_before: list[int] = []  # the waits' total before each one began
        self._first = 0  # waits before this one are forgotten

    def add(self, begin_ns: int, end_ns: int) -> None:
        """One wait, after every wait added before it."""
        if end_ns <= begin_ns:
            return
        total = self._held_before[-1] + self._ends[-1] - self._begins[-1] if self._ends else 0
        self._begins.append(begin_ns)
        self._ends.append(end_ns)
        self._held_before.append(total)

    def within(self, start_ns: int, end_ns: int) -> int:
        """Nanoseconds of waiting between ``start_ns`` and ``end_ns``, neither
        before the instant last given to :meth:`forget_before`."""
        if end_ns <= start_ns:
            return 0
        return self._held_until(end_ns) - self._held_until(start_ns)

    def forget_before(self, instant_ns: int) -> None:
        """No span asked about from now on starts before ``instant_ns``."""
        while self._first < len(self._ends) and self._ends[self._first] <= instant_ns:
            self._first += 1
        if self._first >= COMPACT_AT:
            del self._begins[: self._first], self._ends[: self._first]
            del self._held_before[: self._first]
            self._first = 0

    def _held_until(self, t_ns: int) -> int:
        """The waits' total from the first kept one's start until ``t_ns``."""
        i = bisect_right(self._begins, t_ns, lo=self._first) - 1
        if i < self._first:
            return 0
        base = self._held_before[self._first]
        return self._held_before[i] - base + min(t_ns, self._ends[i]) - self._begins[i]
