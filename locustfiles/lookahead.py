"""Open loop: requests built ahead of their instants, so sending is only writing.

An open-loop dispatcher must start each request at its scheduled instant.
Planning a request (prompt text, token counts, maybe the engine's
``/tokenize``) and encoding its JSON body cost up to milliseconds for a
100k-token prompt; done at the instant, that cost is generator lag, and done
on the dispatcher's own greenlet it also makes the next arrival late.

:class:`LookAhead` moves that work to a greenlet of its own that keeps a
bounded buffer of prepared requests filled ahead of time: at most
``capacity`` of them, none due more than ``horizon_s`` ahead. It prepares one
request per turn of the event loop (bounded work per slice, so reads of
running streams interleave) and never starts one when the next request to
send is due within the guard: about twice the longest recent preparation, so
its CPU-bound work ends before that instant and the dispatcher wakes on time.
The dispatcher only sleeps until each instant and hands over what was built.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import gevent
from gevent.event import Event

__all__ = ["Due", "LookAhead"]

T = TypeVar("T")
P = TypeVar("P")

HORIZON_S = 2.0
CAPACITY = 256
GUARD_MIN_NS = 2_000_000  # the dispatcher's own wake-up is about 1 ms late (libev's epoll)
GUARD_FACTOR = 2
RECENT = 16  # preparations the guard remembers
# The last stretch before an instant is spent yielding to the loop instead of
# asleep: a sleeping process wakes up to milliseconds late (BENCHMARKS.md, an
# idle process here: p99 2.3 ms), one that keeps yielding runs on time. At most
# the guard (no preparation starts meanwhile) and a twentieth of the time
# between two sends (5% of a core at any rate).
SPIN_MAX_NS = GUARD_MIN_NS
SPIN_SHARE = 20


@dataclass(frozen=True, slots=True)
class Due(Generic[P]):
    """A prepared request and the instant (``perf_counter_ns``) it is due."""

    due_ns: int
    item: P


class LookAhead(Generic[T, P]):
    """Prepares ``plans`` ahead of their instants; iterate it for :class:`Due` items
    in schedule order. ``due_ns`` gives a plan's instant; ``prepare`` builds what
    is sent. Plans due at or after ``until_ns`` end the iteration."""

    def __init__(
        self,
        plans: Iterator[T],
        due_ns: Callable[[T], int],
        prepare: Callable[[T], P],
        until_ns: int,
        horizon_s: float = HORIZON_S,
        capacity: int = CAPACITY,
    ) -> None:
        if capacity < 1 or horizon_s <= 0:
            raise ValueError("look-ahead: capacity >= 1 and horizon_s > 0 are required")
        self._plans = plans
        self._due_ns = due_ns
        self._prepare = prepare
        self._until_ns = until_ns
        self._horizon_ns = int(horizon_s * 1e9)
        self._capacity = capacity
        self._buffer: deque[Due[P]] = deque()
        self._recent: deque[int] = deque(maxlen=RECENT)
        self._added = Event()  # set when the buffer gains an item or the plans end
        self._taken = Event()  # set when the dispatcher takes an item
        self._exhausted = False
        self._error: BaseException | None = None
        self._filler: gevent.Greenlet | None = None

    @property
    def buffered(self) -> int:
        """Requests prepared and not yet taken."""
        return len(self._buffer)

    def guard_ns(self) -> int:
        """How far ahead of the next instant no preparation may start."""
        longest = max(self._recent, default=0)
        return max(GUARD_MIN_NS, GUARD_FACTOR * longest)

    def __iter__(self) -> Iterator[Due[P]]:
        self._filler = gevent.spawn(self._fill)
        previous_ns = time.perf_counter_ns()
        try:
            while True:
                while not self._buffer:
                    if self._exhausted:
                        if self._error is not None:
                            raise self._error
                        return
                    self._added.clear()
                    self._added.wait()
                head = self._buffer[0]
                spin_ns = min(SPIN_MAX_NS, max(head.due_ns - previous_ns, 0) // SPIN_SHARE)
                _sleep_until(head.due_ns, spin_ns)
                previous_ns = head.due_ns
                self._buffer.popleft()
                yield head
                # Set only now, after the caller spawned the request's send: that
                # greenlet runs before the filler's next preparation.
                self._taken.set()
        finally:
            self.close()

    def close(self) -> None:
        """Stop preparing (the filler greenlet ends)."""
        if self._filler is not None and not self._filler.dead:
            self._filler.kill(block=False)

    def _fill(self) -> None:
        try:
            for plan in self._plans:
                due = self._due_ns(plan)
                if due >= self._until_ns:
                    break
                self._wait_for_room(due)
                started = time.perf_counter_ns()
                item = self._prepare(plan)
                self._recent.append(time.perf_counter_ns() - started)
                self._buffer.append(Due(due, item))
                self._added.set()
                gevent.sleep(0)  # one preparation per slice: the loop serves reads between
        except Exception as error:  # the dispatcher raises it, where the run handles errors
            self._error = error
        finally:
            self._exhausted = True
            self._added.set()

    def _wait_for_room(self, due_ns: int) -> None:
        """Wait until the plan due at ``due_ns`` may be prepared: room in the
        buffer, within the horizon, and the next instant not within the guard
        (a preparation then would make its dispatch late)."""
        while self._buffer:
            now = time.perf_counter_ns()
            if len(self._buffer) >= self._capacity:
                wait_s = None
            elif due_ns - now > self._horizon_ns:
                wait_s = (due_ns - now - self._horizon_ns) / 1e9
            elif self._buffer[0].due_ns - now < self.guard_ns():
                wait_s = None
            else:
                return
            self._taken.clear()
            self._taken.wait(wait_s)


def _sleep_until(due_ns: int, spin_ns: int = 0) -> None:
    """Sleep until ``spin_ns`` before ``due_ns``, then yield to the loop (reads
    and other greenlets run) until ``due_ns``; never return before it. The
    loop's clock is refreshed first: libev times a sleep from the instant its
    current loop iteration began, so a greenlet that ran a while would
    otherwise wake early."""
    loop = gevent.get_hub().loop
    while (delay_ns := due_ns - spin_ns - time.perf_counter_ns()) > 0:
        loop.update_now()
        gevent.sleep(delay_ns / 1e9)
    while time.perf_counter_ns() < due_ns:
        gevent.idle()  # one turn of the loop: its I/O and timers run first
