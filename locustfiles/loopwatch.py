"""A load process watches itself: its event loop's delays and the collector's pauses.

Every chunk the client times waits for the gevent loop to read it; when the
loop is held (the cyclic collector, a CPU-bound callback, a core taken by
another process, a SIGSTOP) reads come late, and a late read may time two
chunks by one instant (docs/load.md, "The generator's own error"). So every
load process measures that delay while the run is measured:

- a ticker greenlet due every ``TICK_S`` records how late it ran into an HDR
  histogram, with the ticks a stall swallowed filled in (``hdrh``'s
  coordinated-omission correction): one sample per millisecond of wall time
  during which a request was in flight (a stall with nothing in flight times
  no chunk, so it is no error; an open loop's late sends are its lag);
- ``gc.callbacks`` counts the collector's passes and times their pauses;
- the kernel's account of the loop's thread (Linux ``schedstat``: time on a
  core, time waiting for one) splits each stall's time into the process's own
  work, other processes holding the cores, and neither (a stop, a block in the
  kernel, or a hypervisor taking the core: the kernel bills steal to no
  thread), with the machine's steal over the window (``/proc/stat``) to tell
  the last apart, so an invalid verdict names what held the loop;
- stalls over ``STALL_NOTE_NS`` are kept for a while (bounded) so a request
  can ask whether its chunks read together were read while the loop was held.

Start-up is also where the collector's cost is cut: :func:`freeze_startup`
moves everything allocated so far (modules, Locust, the scenarios) out of the
collector's sight, so a full collection during the run has only the run's own
objects to traverse instead of every imported module's (about 100 ms here);
:func:`freeze_spawned` does the same for the users once they have spawned,
and :func:`defer_full_collections` keeps full collections rare.
"""

from __future__ import annotations

import bisect
import gc
import os
import resource
import time
from collections.abc import Callable, Sequence

import gevent

from slogate.analysis.verdict.generator import ProcessHealth

TICK_S = 0.001
TICK_NS = int(TICK_S * 1e9)
TICK_US = TICK_NS // 1000
# A tick this late means the loop was held: a chunk arriving then could be
# read together with the next one. The loop's own latency is about 0.1 ms.
STALL_NOTE_NS = 1_000_000
# Collections of the middle generation between two full ones (CPython: 10).
FULL_COLLECTION_EVERY = 1000
# How far back stalls are kept: longer than any request's wait for its record.
STALL_MEMORY_NS = 120 * 1_000_000_000
# The read that timed a chunk follows the stall's end by up to this much.
READ_SLACK_NS = 1_000_000
# The calling thread's time on a core and waiting for one, in ns (Linux).
SCHEDSTAT = "/proc/thread-self/schedstat"
# The machine's CPU time by kind, in clock ticks summed over its cores (Linux).
PROC_STAT = "/proc/stat"
# Its first line's fields user .. steal (guest time is already inside user).
STAT_FIELDS = 8


class ThreadClock:
    """The loop thread's scheduler account: one ``pread`` (about 1 us) per read.
    Opened on the thread it accounts for; ``read`` gives None where there is
    no such file (not Linux, or a kernel without it)."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open(SCHEDSTAT, os.O_RDONLY)
        except OSError:
            self._fd = None

    def read(self) -> tuple[int, int] | None:
        """(ns on a core, ns waiting for one) since the thread started."""
        if self._fd is None:
            return None
        running, waiting, _ = os.pread(self._fd, 96, 0).split()
        return int(running), int(waiting)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def machine_ticks() -> tuple[int, int] | None:
    """(ticks a hypervisor took, all ticks) since boot over the machine's cores;
    None where the kernel does not tell. About 20 us: read per report, not per tick."""
    try:
        with open(PROC_STAT, "rb") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) <= STAT_FIELDS or fields[0] != b"cpu":
        return None
    ticks = [int(field) for field in fields[1 : STAT_FIELDS + 1]]
    return ticks[-1], sum(ticks)


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time a hypervisor took between two reads
    of :func:`machine_ticks` (None when either is unknown or no tick passed)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def freeze_startup() -> None:
    """Collect start-up's garbage, then move every object left to the permanent
    generation: the collector never traverses them again. Full collections
    are deferred from then on."""
    gc.collect()
    gc.freeze()
    defer_full_collections()


def defer_full_collections() -> None:
    """Let a full collection run only after ``FULL_COLLECTION_EVERY`` collections
    of the middle generation instead of CPython's 10: tens of minutes apart
    at a run's allocation rate, instead of whenever spawning users promoted
    enough objects. Young collections go on as ever; the hot path leaves no
    cyclic garbage for the old generation to hold (tests/analysis/test_histograms.py)."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


def freeze_spawned() -> None:
    """Users have spawned: collect the young generations' garbage (cheap), then
    move the users' long-lived objects out of the collector's sight too. A
    thousand users are a few hundred thousand objects: one full collection
    over them paused the loop for over 100 ms (BENCHMARKS.md)."""
    gc.collect(1)
    gc.freeze()


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class LoopWatch:
    """Measures this process's loop delays and collector pauses from ``start``
    until ``stop``; :meth:`health` is the measurement so far. ``busy`` tells
    whether a request is in flight (always, when not given)."""

    def __init__(self, busy: Callable[[], bool] | None = None) -> None:
        self._busy = busy or (lambda: True)
        self._health = ProcessHealth()
        self._greenlet: gevent.Greenlet | None = None
        self._gc_started_ns = 0
        self._from_ns = 0
        self._cpu_from = 0.0
        self._ticks_from: tuple[int, int] | None = None
        self._stall_starts: list[int] = []
        self._stall_ends: list[int] = []

    @property
    def running(self) -> bool:
        return self._greenlet is not None

    def start(self, from_ns: int | None = None) -> None:
        """Watch from now; count only what happens from ``from_ns`` on (the end
        of warm-up; ``perf_counter_ns`` clock), when given."""
        if self._greenlet is not None:
            return
        self._from_ns = time.perf_counter_ns() if from_ns is None else from_ns
        self._cpu_from = _cpu_s()
        self._ticks_from = machine_ticks()
        self._health.pid = os.getpid()
        gc.callbacks.append(self._on_gc)
        self._greenlet = gevent.spawn(self._tick)

    def stop(self) -> None:
        """Stop watching (the end of the measured window); the health stays."""
        if self._greenlet is None:
            return
        self._snapshot_cpu()
        self._greenlet.kill(block=False)
        self._greenlet = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def health(self) -> ProcessHealth:
        """The measurement so far (CPU time up to now while running)."""
        if self._greenlet is not None:
            self._snapshot_cpu()
        return self._health

    def stalled_reads(self, instants_ns: Sequence[int]) -> int:
        """How many of these read instants (``perf_counter_ns``) fell in a stall
        of the loop, or just after one (the read that ended it)."""
        ends = self._stall_ends
        count = 0
        for instant in instants_ns:
            index = bisect.bisect_left(ends, instant - READ_SLACK_NS)
            if index < len(ends) and self._stall_starts[index] <= instant:
                count += 1
        return count

    def _snapshot_cpu(self) -> None:
        now = time.perf_counter_ns()
        if now > self._from_ns:
            self._health.wall_s = (now - self._from_ns) / 1e9
            self._health.cpu_s = _cpu_s() - self._cpu_from
            self._health.steal_share = steal_share(self._ticks_from, machine_ticks())

    def _on_gc(self, phase: str, info: dict) -> None:
        now = time.perf_counter_ns()
        if phase == "start":
            self._gc_started_ns = now
            return
        if now < self._from_ns or not self._gc_started_ns:
            return
        pause = now - self._gc_started_ns
        health = self._health
        health.gc_collections[min(info.get("generation", 0), 2)] += 1
        health.gc_total_pause_ns += pause
        health.gc_max_pause_ns = max(health.gc_max_pause_ns, pause)

    def _tick(self) -> None:
        """A stall counts when a request was in flight as it began (only the
        greenlet that held the loop can have started one since)."""
        health = self._health
        stall = health.stall
        busy = self._busy
        clock = ThreadClock()
        health.held_split = clock.read() is not None
        try:
            previous = time.perf_counter_ns()
            account = clock.read()
            was_busy = busy()
            while True:
                gevent.sleep(TICK_S)
                now = time.perf_counter_ns()
                late = max(now - previous - TICK_NS, 0)
                then, account = account, clock.read()
                if was_busy and now >= self._from_ns:
                    stall.record_corrected_value(late // 1000, TICK_US)
                    if late > STALL_NOTE_NS:
                        self._note_stall(previous, now)
                        health.note_held(late, *_spent(then, account))
                previous = now
                was_busy = busy()
        finally:
            clock.close()

    def _note_stall(self, start_ns: int, end_ns: int) -> None:
        """Keep the stall; forget the oldest in bulk once past the memory (cheap
        even when every tick of an overloaded loop is a stall)."""
        self._stall_starts.append(start_ns)
        self._stall_ends.append(end_ns)
        if self._stall_ends[0] < end_ns - 2 * STALL_MEMORY_NS:
            cut = bisect.bisect_left(self._stall_ends, end_ns - STALL_MEMORY_NS)
            del self._stall_starts[:cut]
            del self._stall_ends[:cut]


def _spent(
    before: tuple[int, int] | None, after: tuple[int, int] | None
) -> tuple[int | None, int | None]:
    """Time on a core and waiting for one between two reads of a ``ThreadClock``."""
    if before is None or after is None:
        return None, None
    return after[0] - before[0], after[1] - before[1]
