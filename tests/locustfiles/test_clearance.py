"""Bookkeeping waits for a gap between open-loop instants: a real look-ahead
dispatches a schedule while work asks the clearance for its turn."""

from __future__ import annotations

import time

import gevent
from reportdata import request

from slogate import scenarios
from slogate.locustfiles.clearance import RECENT, WAIT_MAX_NS, Clearance
from slogate.locustfiles.context import LoadContext
from slogate.locustfiles.lookahead import LookAhead

MS = 1_000_000


def dispatch(offsets_ms: list[float], taken: list[int]) -> LookAhead:
    """A look-ahead over plans due at ``offsets_ms``; a greenlet takes each,
    waits at its gate and begins its write at once, as a send does."""
    ahead = LookAhead(
        iter(range(len(offsets_ms))),
        offset_ns=lambda i: int(offsets_ms[i] * MS),
        prepare=str,
        until_ns=time.perf_counter_ns() + 10_000 * MS,
    )

    def take() -> None:
        for due in ahead:
            due.gate.wait()
            taken.append(time.perf_counter_ns())
            ahead.written()

    gevent.spawn(take)
    gevent.sleep(0)  # the schedule's clock starts
    return ahead


def test_work_that_would_run_into_an_instant_waits_until_it_was_sent() -> None:
    taken: list[int] = []
    ahead = dispatch([40.0, 400.0], taken)
    clearance = Clearance()
    clearance.watch(ahead)
    clearance.spent("record", 20 * MS)  # the last record took 20 ms
    gevent.sleep((ahead.origin_ns + 30 * MS - time.perf_counter_ns()) / 1e9)
    with clearance.clear("record"):  # 10 ms before the first instant
        started = time.perf_counter_ns()
    assert len(taken) >= 1 and started > taken[0]
    assert started < ahead.origin_ns + 400 * MS and len(taken) == 1


def test_work_far_from_any_instant_runs_at_once_without_yielding() -> None:
    taken: list[int] = []
    ahead = dispatch([500.0], taken)
    clearance = Clearance()
    clearance.watch(ahead)
    ran = []
    gevent.spawn(ran.append, "another greenlet")
    with clearance.clear("record"):
        pass
    assert ran == [] and taken == []


def test_a_process_without_look_ahead_never_waits() -> None:
    clearance = Clearance()
    clearance.spent("record", 10_000 * MS)
    ran = []
    gevent.spawn(ran.append, "another greenlet")
    clearance.wait(clearance.cost_ns("record"))
    assert ran == []


def test_a_schedule_with_no_gap_still_gets_its_work_done_after_the_bound() -> None:
    taken: list[int] = []
    ahead = dispatch([1.0 * i for i in range(1, 400)], taken)  # an instant every 1 ms
    clearance = Clearance()
    clearance.watch(ahead)
    clearance.spent("windows", 5 * MS)
    asked = time.perf_counter_ns()
    with clearance.clear("windows"):
        started = time.perf_counter_ns()
    assert started - asked >= WAIT_MAX_NS
    assert len(taken) < 399  # it ran while instants were still to come


def test_a_stop_while_waiting_still_does_the_work_then_stops() -> None:
    taken: list[int] = []
    ahead = dispatch([30.0, 1_000.0], taken)
    clearance = Clearance()
    clearance.watch(ahead)
    clearance.spent("record", 100 * MS)
    done: list[str] = []

    def record() -> None:
        with clearance.clear("record"):
            done.append("recorded")
        done.append("went on")

    worker = gevent.spawn(record)
    gevent.sleep(0.005)
    assert done == []  # waiting for the gap after the first instant
    worker.kill()
    assert done == ["recorded"] and worker.dead


def test_a_kind_expects_its_longest_recent_stretch() -> None:
    clearance = Clearance()
    with clearance.clear("view"):
        spin_until = time.perf_counter_ns() + 3 * MS
        while time.perf_counter_ns() < spin_until:
            pass
    assert clearance.cost_ns("view") >= 3 * MS
    assert clearance.cost_ns("record") == 0
    for _ in range(RECENT):
        clearance.spent("view", 1)
    assert clearance.cost_ns("view") == 1


def test_steps_time_each_step_and_the_last() -> None:
    clearance = Clearance()
    steps = clearance.steps("journal")
    for ms in (2, 1):
        spin_until = time.perf_counter_ns() + ms * MS
        while time.perf_counter_ns() < spin_until:
            pass
        steps()
    steps.done()
    assert 2 * MS <= clearance.cost_ns("journal") < 50 * MS


def test_a_request_recorded_after_its_wait_lands_in_the_window_it_ended_in() -> None:
    loaded = scenarios.load("tests/data/exact-chat.yaml")
    ctx = LoadContext(loaded, "http://127.0.0.1:9", "m", seed=1, shards=1, window_s=1.0,
                      origin_s=time.time() - 10.0)  # fmt: skip
    ctx.record(request(50, scenario="exact-chat"), ended_s=3.5)
    ctx.record(request(50, scenario="exact-chat"))
    windows = sorted(index for _, index in ctx.recorder.windows)
    assert windows[0] == 3 and windows[1] >= 10
