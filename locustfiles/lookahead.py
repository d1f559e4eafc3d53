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

The dispatcher hands each instant's requests over a little ahead of it (its
lead: at most ``SPIN_MAX_NS``, a twentieth of the time since the instant
before), each with the instant's :class:`Gate`, which a greenlet of its own
opens exactly at the instant. The consumer does everything a send needs
before the write (a greenlet, a slot, its bookkeeping) during the lead and
waits at the gate; when it opens, its waiters write one after another and
nothing else runs between them (the filler too waits while a gate is
pending). Handed over at its instant, a burst of 16 60 KB requests began its
first write 0.6 to 0.9 ms after it (the hand-over of all 16, then each
send's set-up) and its last reached the server 1.5 to 2.6 ms after it in
most bursts; handed over ahead, the first writes 0.06 ms after the instant
and the last arrives 0.75 to 1.4 ms after it (BENCHMARKS.md). The
instants within ``SPIN_MAX_NS`` after a group's first are handed over with
it, each with a gate of its own: a trace's burst spreads over a millisecond,
and given a twentieth of its 60 us gaps as their leads, its later requests
did their set-up after their instants (lag p50 0.9 ms, against 0.35 to 0.5
with the group). The dispatcher ends its sleep before a group's lead early by
as much as its recent wake-ups were late (:class:`WakeMargin`).

Bursts (many requests due within the same millisecond, as real traces have)
need three more things. The schedule's clock starts only once the requests
due in its first ``PRIME_S`` are built, so a burst at the very start is not
late by its own preparation. No preparation (nor the planning before it)
starts while a request handed over has not yet begun its write (the
consumer says so with :meth:`LookAhead.written`): a burst is handed over
whole and its sends run before the filler takes the CPU again. And after each
preparation ``ready`` is told the most prepared requests due within
``READY_SPAN_S`` of one another (a burst just built, or the next few), and
again after requests were taken, while the next is not yet within the guard,
so what sending them needs (connections) is made ahead too, and no more than
that.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import gevent
from gevent.event import Event

__all__ = ["Due", "LookAhead", "WakeMargin", "joins_group", "lead_ns"]

T = TypeVar("T")
P = TypeVar("P")

HORIZON_S = 2.0
CAPACITY = 256
PRIME_S = 0.25  # the start's requests built before the schedule's clock starts
READY_SPAN_S = 0.1
GUARD_MIN_NS = 2_000_000  # the dispatcher's own wake-up is about 1 ms late (libev's epoll)
GUARD_FACTOR = 2
RECENT = 16  # preparations the guard remembers
# How long the filler waits for handed-over requests to begin their writes
# before it prepares anyway (a connect that hangs must not starve the rest).
HOLD_MAX_NS = 20_000_000
# The last stretch before an instant is spent yielding to the loop instead of
# asleep: a sleeping process wakes up to milliseconds late (BENCHMARKS.md, an
# idle process here: p99 2.3 ms), one that keeps yielding runs on time. At most
# the guard (no preparation starts meanwhile) and a twentieth of the time
# between two sends (5% of a core at any rate). The instant's requests are
# handed over as it starts (the lead).
SPIN_MAX_NS = GUARD_MIN_NS
SPIN_SHARE = 20
# The dispatcher also stops sleeping before the lead by as much as its recent
# wake-ups were late (``WakeMargin``): after a sleep of tens of milliseconds
# this machine wakes a process 0.8 ms late typically and 1.4 to 4.4 ms late at
# p99 (a core left idle that long is halted, and the hypervisor wakes it), so
# a burst's hand-over overran its 2 ms lead now and then. At most
# ``WAKE_MARGIN_MAX_NS``, and lead and margin together at most a tenth of the
# time between two instants.
WAKE_MARGIN_MAX_NS = 5_000_000
WAKE_SHARE = 10


class Gate:
    """Where the requests of one instant, handed over ahead of it, wait for it.
    Opened by a greenlet that sleeps, then yields to the loop, until the
    instant, and never before the gate handed over before it (``after``): a
    pause of the machine across several instants of a burst would otherwise
    let their openers run in any order (seen in CI: 0, 1, 7, 6, 3, 2, ...).
    Waiters are released in the order they came, each running until it blocks
    (after its write). Cancelled when the schedule is closed first: those
    requests are never sent."""

    __slots__ = ("_after", "_event", "_opener", "cancelled", "due_ns")

    def __init__(self, due_ns: int, lead_ns: int, after: Gate | None = None) -> None:
        self.due_ns = due_ns
        self.cancelled = False
        self._after = after
        self._event = Event()
        self._opener = gevent.spawn(self._open_at_instant, lead_ns)

    def wait(self) -> bool:
        """Block until the instant: True, the request is due; False, the
        schedule was closed before it and the request must not be sent."""
        self._event.wait()
        return not self.cancelled

    @property
    def pending(self) -> bool:
        """Neither opened nor cancelled yet."""
        return not self._event.is_set()

    def cancel(self) -> None:
        """Release the waiters unsent (no-op once opened)."""
        if self.pending:
            self._opener.kill(block=False)
            self.cancelled = True
            self._event.set()

    def _open_at_instant(self, lead_ns: int) -> None:
        _sleep_until(self.due_ns, lead_ns)
        if self._after is not None:
            self._after._event.wait()  # its waiters go first: they were notified first
            self._after = None
        self._event.set()


def lead_ns(gap_ns: int) -> int:
    """How far ahead of an instant ``gap_ns`` after the one before its group is
    handed over (and the dispatcher yields to the loop instead of sleeping)."""
    return min(SPIN_MAX_NS, gap_ns // SPIN_SHARE)


def joins_group(due_ns: int, group_ns: int) -> bool:
    """Whether the instant ``due_ns`` is handed over with the group whose first
    instant is ``group_ns``."""
    return due_ns - group_ns <= SPIN_MAX_NS


class WakeMargin:
    """How much earlier the dispatcher ends its sleep before an instant's lead,
    and yields to the loop instead: the latest of its ``RECENT`` wake-ups, so a
    machine that wakes late is woken early by that much (about 1% of a core
    here), within ``WAKE_MARGIN_MAX_NS`` and ``WAKE_SHARE``."""

    __slots__ = ("_recent",)

    def __init__(self) -> None:
        self._recent: deque[int] = deque(maxlen=RECENT)

    def note(self, late_ns: int | None) -> None:
        """One sleep's lateness (None: the dispatcher did not sleep)."""
        if late_ns is not None:
            self._recent.append(late_ns)

    def ns(self, gap_ns: int, lead_ns: int) -> int:
        """The margin before an instant ``gap_ns`` after the one before, whose
        lead is ``lead_ns``."""
        latest = max(self._recent, default=0)
        return max(0, min(latest, WAKE_MARGIN_MAX_NS, gap_ns // WAKE_SHARE - lead_ns))


@dataclass(frozen=True, slots=True)
class Due(Generic[P]):
    """A prepared request, the instant (``perf_counter_ns``) it is due, how
    long after that instant the dispatcher waited for it to be built (its lag's
    "prepared late" part; the rest of its lag is the dispatcher's or the send's),
    and the gate its write must wait at: it is handed over up to a lead ahead."""

    due_ns: int
    item: P
    waited_ns: int
    gate: Gate


class LookAhead(Generic[T, P]):
    """Prepares ``plans`` ahead of their instants; iterate it for :class:`Due` items
    in schedule order. ``offset_ns`` gives a plan's instant from the schedule's
    start (``origin_ns``, set as the iteration starts, once the first plans are
    built); ``prepare`` builds what is sent. Plans due at or after ``until_ns``
    (``perf_counter_ns``) end the iteration. The consumer waits at each item's
    :attr:`Due.gate` before its write, and calls :meth:`written` once for every
    item handed over, when its write began (or it failed before)."""

    def __init__(
        self,
        plans: Iterator[T],
        offset_ns: Callable[[T], int],
        prepare: Callable[[T], P],
        until_ns: int,
        horizon_s: float = HORIZON_S,
        capacity: int = CAPACITY,
        ready: Callable[[int], None] | None = None,
    ) -> None:
        if capacity < 1 or horizon_s <= 0:
            raise ValueError("look-ahead: capacity >= 1 and horizon_s > 0 are required")
        self._plans = plans
        self._offset_ns = offset_ns
        self._prepare = prepare
        self._until_ns = until_ns
        self._horizon_ns = int(horizon_s * 1e9)
        self._capacity = capacity
        self._ready = ready
        self.origin_ns = 0
        self._buffer: deque[tuple[int, P]] = deque()  # (offset, prepared), in order
        self._recent: deque[int] = deque(maxlen=RECENT)
        self._unwritten = 0  # handed over, write not yet begun
        self._added = Event()  # set when the buffer gains an item or the plans end
        self._changed = Event()  # set when an item is taken or begins its write
        self._pending: T | None = None  # planned before the start, prepared after it
        self._next_offset: int | None = None  # of the plan planned and not yet prepared
        self._exhausted = False
        self._error: BaseException | None = None
        self._filler: gevent.Greenlet | None = None
        self._taken = 0  # requests handed over
        self._told = -1  # ``_taken`` when ``ready`` last heard
        self._gates: deque[Gate] = deque()  # handed over, perhaps not yet open
        self._waking = WakeMargin()

    @property
    def buffered(self) -> int:
        """Requests prepared and not yet taken."""
        return len(self._buffer)

    def guard_ns(self) -> int:
        """How far ahead of the next instant no preparation may start."""
        longest = max(self._recent, default=0)
        return max(GUARD_MIN_NS, GUARD_FACTOR * longest)

    def due_soon(self) -> int:
        """The most prepared requests due within ``READY_SPAN_S`` of one another,
        counted from the next one and back from the newest: a burst is known
        as soon as it is built, up to the horizon ahead, and what sending it
        needs is made then, not once the requests before it have gone."""
        if not self._buffer:
            return 0
        first = self._buffer[0][0] + READY_SPAN_S * 1e9
        newest = self._buffer[-1][0] - READY_SPAN_S * 1e9
        return max(
            sum(1 for _ in itertools.takewhile(lambda b: b[0] <= first, self._buffer)),
            sum(1 for _ in itertools.takewhile(lambda b: b[0] >= newest, reversed(self._buffer))),
        )

    def clear_in_ns(self, cost_ns: int) -> int:
        """How long other work of ``cost_ns`` on this loop must wait not to make
        an instant late (:class:`~slogate.locustfiles.clearance.Clearance`): 0
        when it would end a guard before the next instant, else until a guard
        after it (a burst's sends take less), and a guard again while a request
        handed over has not begun its write: a waiter looks a few times per
        burst, not once per request of it."""
        if self.origin_ns == 0:
            return 0  # not started: the first instants are still being built
        if self._unwritten > 0:
            return self.guard_ns()
        if self._buffer:
            offset: int | None = self._buffer[0][0]
        else:
            offset = self._next_offset
        if offset is None:
            return 0
        until_ns = self.origin_ns + offset - time.perf_counter_ns()
        if until_ns > self.guard_ns() + cost_ns:
            return 0
        return max(until_ns, 0) + self.guard_ns()

    def written(self) -> None:
        """A request handed over began its write (or failed before it); the
        filler hears once the last of them did."""
        self._unwritten -= 1
        if self._unwritten == 0:
            self._changed.set()

    def __iter__(self) -> Iterator[Due[P]]:
        self._prime()
        # The clock starts a full lead from now, so the first instant's requests
        # are handed over ahead of it as every later instant's are.
        self.origin_ns = time.perf_counter_ns() + SPIN_MAX_NS
        if not self._exhausted:
            self._filler = gevent.spawn(self._fill)
        previous_ns = self.origin_ns - SPIN_MAX_NS * SPIN_SHARE
        group_ns = handed_ns = 0  # the first instant of the group handed over together
        gate: Gate | None = None
        try:
            while True:
                sought_ns = arrived_ns = time.perf_counter_ns()
                while not self._buffer:
                    if self._exhausted:
                        for pending in list(self._gates):  # the last ones' instants have come
                            pending.wait()
                        if self._error is not None:
                            raise self._error
                        return
                    self._added.clear()
                    self._added.wait()
                    arrived_ns = time.perf_counter_ns()
                offset, item = self._buffer[0]
                due_ns = self.origin_ns + offset
                waited_ns = max(0, arrived_ns - max(sought_ns, due_ns))
                if gate is None or gate.due_ns != due_ns:
                    if gate is None or not joins_group(due_ns, group_ns):
                        gap_ns = max(due_ns - previous_ns, 0)
                        lead = lead_ns(gap_ns)
                        margin_ns = self._waking.ns(gap_ns, lead)
                        self._waking.note(_sleep_until(due_ns - lead, margin_ns))
                        group_ns, handed_ns = due_ns, due_ns - lead
                    gate = self._gate(due_ns, due_ns - handed_ns)
                    previous_ns = due_ns
                self._buffer.popleft()
                self._taken += 1
                self._unwritten += 1
                yield Due(due_ns, item, waited_ns, gate)
                # Set only now, after the caller spawned the request's send: that
                # greenlet runs before the filler's next preparation. With more
                # buffered the filler holds until the writes began (``written``
                # wakes it), so waking it once per request of a burst would
                # only cost the burst a switch each.
                if not self._buffer:
                    self._changed.set()
        finally:
            self.close()

    def close(self) -> None:
        """Stop preparing (the filler greenlet ends); the requests handed over
        ahead of an instant not yet come are released unsent."""
        if self._filler is not None and not self._filler.dead:
            self._filler.kill(block=False)
        for gate in self._gates:
            gate.cancel()
        self._gates.clear()

    def _gate(self, due_ns: int, lead_ns: int) -> Gate:
        """A gate for the instant ``due_ns``, remembered until it opened."""
        while self._gates and not self._gates[0].pending:
            self._gates.popleft()
        gate = Gate(due_ns, lead_ns, self._gates[-1] if self._gates else None)
        self._gates.append(gate)
        return gate

    def _prime(self) -> None:
        """Build the plans due in the schedule's first ``PRIME_S`` (at most
        ``capacity``, within the horizon) before its clock starts."""
        first: int | None = None
        span_ns = min(PRIME_S * 1e9, self._horizon_ns)
        try:
            while len(self._buffer) < self._capacity and not self._exhausted:
                plan = self._next_plan()
                if plan is None:
                    return
                offset = self._offset_ns(plan)
                first = offset if first is None else first
                if offset - first > span_ns:
                    self._pending, self._next_offset = plan, offset
                    return
                self._build(plan, offset, 0)
        except Exception as error:  # raised after the plans built before it, as _fill's
            self._error = error
            self._exhausted = True

    def _fill(self) -> None:
        try:
            while True:
                self._wait_for_room(None)
                started = time.perf_counter_ns()
                plan = self._next_plan()
                if plan is None:
                    return
                planned_ns = time.perf_counter_ns() - started
                offset = self._next_offset = self._offset_ns(plan)
                self._wait_for_room(offset)
                self._next_offset = None
                self._build(plan, offset, planned_ns)
                self._added.set()
                gevent.sleep(0)  # one preparation per slice: the loop serves reads between
        except Exception as error:  # the dispatcher raises it, where the run handles errors
            self._error = error
        finally:
            self._exhausted = True
            self._added.set()

    def _next_plan(self) -> T | None:
        """The next plan (None once they end or reach ``until_ns``; before the
        schedule's clock starts, it would start now)."""
        plan, self._pending = self._pending, None
        if plan is None:
            plan = next(self._plans, None)
        origin_ns = self.origin_ns or time.perf_counter_ns()
        if plan is None or origin_ns + self._offset_ns(plan) >= self._until_ns:
            self._exhausted = True
            return None
        return plan

    def _build(self, plan: T, offset: int, planned_ns: int) -> None:
        """Prepare ``plan`` into the buffer, then make what sending it needs; the
        whole cost (with its planning) is remembered for the guard."""
        started = time.perf_counter_ns()
        self._buffer.append((offset, self._prepare(plan)))
        if self._ready is not None:
            self._told = self._taken
            self._ready(self.due_soon())
        self._recent.append(planned_ns + time.perf_counter_ns() - started)

    def _wait(self, seconds: float | None) -> None:
        self._changed.clear()
        self._changed.wait(seconds)

    def _wait_for_writes(self) -> None:
        """Hold while a request handed over has not begun its write (at most
        ``HOLD_MAX_NS`` at a time), unless the dispatcher may be
        waiting for the next preparation (nothing buffered, and the next plan
        unknown or due within the guard): holding then would make every
        catch-up wait for each send in turn (at 100 requests/s on a starved
        machine, lag p99 0.86 s instead of 0.09 s)."""
        deadline = time.perf_counter_ns() + HOLD_MAX_NS
        while self._unwritten > 0 and self._holding():
            left = deadline - time.perf_counter_ns()
            if left <= 0:
                return
            before = self._unwritten
            self._wait(left / 1e9)
            if self._unwritten < before:
                deadline = time.perf_counter_ns() + HOLD_MAX_NS

    def _tell_ready(self) -> None:
        """Tell ``ready`` again once requests were taken since it last heard,
        unless the next one is due within the guard: the requests in flight
        may hold connections made for a burst still to come, and the time to
        make up for them is before it."""
        if self._ready is None or self._told == self._taken:
            return
        if self.origin_ns + self._buffer[0][0] - time.perf_counter_ns() <= self.guard_ns():
            return
        self._told = self._taken
        self._ready(self.due_soon())

    def _holding(self) -> bool:
        """Whether the next preparation can wait for the sends handed over: it
        always can while some wait at a gate (their instant is at most a lead
        away: a preparation then would open the gate late)."""
        if self._buffer or (self._gates and self._gates[-1].pending):
            return True
        offset = self._next_offset
        return offset is not None and (
            self.origin_ns + offset - time.perf_counter_ns() > self.guard_ns()
        )

    def _wait_for_room(self, offset: int | None) -> None:
        """Wait until a plan may be planned (``offset`` None) or the one due at
        ``offset`` prepared: every request handed over has begun its write,
        room in the buffer, within the horizon, and the next instant not within
        the guard (work started then would make its dispatch late). With
        nothing buffered, at once: the next request is overdue."""
        while True:
            self._wait_for_writes()
            if not self._buffer:
                return
            self._tell_ready()
            now = time.perf_counter_ns()
            if len(self._buffer) >= self._capacity:
                wait_s = None
            elif offset is not None and self.origin_ns + offset - now > self._horizon_ns:
                wait_s = (self.origin_ns + offset - now - self._horizon_ns) / 1e9
            elif self.origin_ns + self._buffer[0][0] - now < self.guard_ns():
                wait_s = None
            else:
                return
            self._wait(wait_s)


def _sleep_until(due_ns: int, spin_ns: int = 0) -> int | None:
    """Sleep until ``spin_ns`` before ``due_ns``, then yield to the loop (reads
    and other greenlets run) until ``due_ns``; never return before it. How
    late the sleep woke (None: it was already time to spin). The loop's clock
    is refreshed first: libev times a sleep from the instant its current loop
    iteration began, so a greenlet that ran a while would otherwise wake early."""
    loop = gevent.get_hub().loop
    wake_ns = due_ns - spin_ns
    late_ns = None
    while (delay_ns := wake_ns - time.perf_counter_ns()) > 0:
        loop.update_now()
        gevent.sleep(delay_ns / 1e9)
        late_ns = time.perf_counter_ns() - wake_ns
    while time.perf_counter_ns() < due_ns:
        gevent.idle()  # one turn of the loop: its I/O and timers run first
    return late_ns
