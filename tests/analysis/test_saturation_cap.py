"""Saturation past the in-flight cap, on hand-checked numbers: the arrivals held
back by ``load.max_in_flight`` are counted as queue, the dispatcher's waits for
a slot are the cap's part of the lag, the detector flags a queue that grows at
the cap, and a lag the cap caused is not called the load generator's fault."""

from __future__ import annotations

import pytest
from reportdata import bucket, run_of

from slogate.analysis.diagnosis.diagnose import diagnose
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import lag_parts
from slogate.analysis.verdict.lag_causes import cause_p99_ms, held_by_cap
from slogate.analysis.verdict.saturation import detect
from slogate.analysis.verdict.slo import evaluate_run
from slogate.locustfiles.backlog import COMPACT_AT, Backlog, HeldTime

S = 1_000_000_000
TTFT_MS = [float(v) for v in range(1, 101)]


def test_held_time_is_the_waits_inside_a_span_and_forgets_the_old_ones() -> None:
    """Waits 100-200, 300-350 and 500-600 ns: 150..320 holds 50 + 20 = 70 of them,
    320..550 holds 30 + 50 = 80, all of them 250; a span inside no wait holds 0."""
    held = HeldTime()
    for begin, end in ((100, 200), (300, 350), (500, 600)):
        held.add(begin, end)
    held.add(700, 700)  # no wait: the pool had a slot
    assert held.within(150, 320) == 70
    assert held.within(320, 550) == 80
    assert held.within(0, 1000) == 250
    assert held.within(210, 290) == 0 and held.within(400, 300) == 0
    held.forget_before(250)  # the first wait ended before any span still asked about
    assert held.within(250, 1000) == 150 and held.within(320, 550) == 80


def test_held_time_stays_exact_once_it_compacts() -> None:
    """Waits of 10 ns every 100 ns: 2,000 of them; after forgetting the first
    1,500 (past the compaction point) a span over the last 5 holds 50 ns."""
    held = HeldTime()
    for i in range(2000):
        held.add(100 * i, 100 * i + 10)
    held.forget_before(150_000)
    assert COMPACT_AT < 1500
    assert held.within(199_500, 200_000) == 50
    assert held.within(150_005, 150_105) == 5 + 5


def test_the_backlog_counts_arrivals_due_and_not_dispatched_nor_dropped() -> None:
    """Arrivals at 0.1, 0.2, 0.2, 0.5 and 1.0 s: at 0.25 s three are due; one was
    dispatched and one dropped, so one is held; at 2 s all five are due."""
    origin = [0]
    dropped = [0]
    backlog = Backlog(iter([0.1, 0.2, 0.2, 0.5, 1.0]), lambda: origin[0], lambda: dropped[0])
    assert backlog.held(5 * S) == 0  # the schedule has not started
    origin[0] = 10 * S
    assert backlog.held(10 * S + S // 4) == 3
    backlog.dispatched += 1
    dropped[0] = 1
    assert backlog.held(10 * S + S // 4) == 1
    assert backlog.held(12 * S) == 3 and backlog.due == 5
    backlog.dispatched += 4  # a lead ahead of their instants: never below 0
    assert backlog.held(12 * S) == 0


def test_a_slot_wait_is_the_lag_s_cap_part_and_the_five_parts_sum_to_the_lag() -> None:
    """Scheduled at 1,000 ns, 100 ns waiting for the look-ahead, 700 for a slot,
    started 2,000, connected 2,050, written 2,060: dispatcher late is the rest,
    2,000 - 1,000 - 100 - 700 = 200."""
    record = RequestRecord(scenario="chat", start_ns=2000, scheduled_ns=1000)
    record.prepare_wait_ns, record.cap_wait_ns = 100, 700
    record.connected_ns, record.sent_ns = 2050, 2060
    parts = lag_parts(record)
    assert parts is not None
    assert dict(parts.items()) == {
        "lag_prepare": 100,
        "lag_cap": 700,
        "lag_dispatch": 200,
        "lag_connect": 50,
        "lag_write": 10,
    }
    assert sum(v for _, v in parts.items()) == record.sent_ns - record.scheduled_ns


def capped_rows(
    backlog: list[int], ttft_sched: list[float] | None, waits: list[float] | None = None
) -> list[dict]:
    """Six 5 s windows from 10 s of an engine finishing 2 requests/s under a cap
    of 8: in flight stays 8, TTFT from the send stays 3.3 s; ``waits``: the
    oldest held-back arrival's wait when each window was closed."""
    rows = []
    for i, held in enumerate(backlog):
        row = {"scenario": "chat", "t_s": 10.0 + 5.0 * i, "window_s": 5.0,
               "requests_ok": 9, "requests_failed": 1, "in_flight": 8,
               "ttft_p50_ms": 3300.0, "backlog": held}  # fmt: skip
        if ttft_sched is not None:
            row["ttft_sched_p50_ms"] = ttft_sched[i]
        if waits is not None:
            row["backlog_wait_ms"] = waits[i]
        rows.append(row)
    return rows


def test_a_queue_held_back_at_the_cap_is_found_and_named_against_the_offered_rate() -> None:
    """6 arrivals/s offered, 2 finished: 20 more held back every 5 s window (4/s),
    each waiting 5 s longer (1,000 ms/s from the schedule). The queue is 8 in
    flight + 20, 40, ... held: 28 -> 128, growth 357%; TTFT 8,300 -> 33,300 ms."""
    backlog = [20 * (i + 1) for i in range(6)]
    ttft_sched = [3300.0 + 5000.0 * (i + 1) for i in range(6)]
    found = detect("chat", capped_rows(backlog, ttft_sched), since_s=10.0, offered_per_s=6.0)
    assert found is not None and found.at_s == 40.0
    assert found.in_flight.slope == pytest.approx(4.0)
    assert (found.in_flight.start, found.in_flight.end) == (pytest.approx(28), pytest.approx(128))
    assert found.ttft_ms.slope == pytest.approx(1000.0)
    assert found.finished_per_s == pytest.approx(2.0)  # 6 x 10 requests over 30 s
    assert found.reason == (
        "chat: past saturation at 40 s: requests in flight and held back 28 -> 128 (+4.00/s) "
        "and TTFT p50 from the schedule (or the held-back wait, if longer) 8300 -> 33300 ms "
        "(+1000.0 ms/s) both rising over the "
        "last 6 windows at 99% confidence; the engine finished 2 requests/s against 6 offered: "
        "the latencies describe a queue, not the server"
    )
    saved = found.to_dict()
    assert saved["held_back"] is True and saved["ttft_from_schedule"] is True
    assert (saved["finished_per_s"], saved["offered_per_s"]) == (pytest.approx(2.0), 6.0)


def test_the_held_back_wait_stands_for_a_ttft_that_lags_the_queue() -> None:
    """TTFT p50 from the schedule of the requests that finished in each window of
    the issue's run (20 to 45 s: sent about 50 s before, as they happened to
    finish): no trend at 99% (its slope's lower bound is -1,069 ms/s). The oldest
    held-back arrival waited 7, 12, ... 32 s as the windows closed: each above
    that window's TTFT, so the signal is 1,000 ms/s, and the queue is found."""
    ttft_sched = [5439.0, 10625.0, 15614.0, 3029.0, 5431.0, 24330.0]
    backlog = [20 * (i + 1) for i in range(6)]
    assert detect("chat", capped_rows(backlog, ttft_sched), since_s=10.0) is None
    waits = [7000.0 + 5000.0 * i for i in range(6)]
    found = detect("chat", capped_rows(backlog, ttft_sched, waits), since_s=10.0)
    assert found is not None and found.ttft_ms.slope == pytest.approx(1000.0)
    assert (found.ttft_ms.start, found.ttft_ms.end) == (pytest.approx(7000), pytest.approx(32000))


def test_at_the_cap_the_in_flight_gauge_and_ttft_from_the_send_alone_stay_flat() -> None:
    """The same windows without the held-back count or TTFT from the schedule (as
    the detector read them before): both signals flat, nothing found; a backlog
    that stays bounded is no saturation either."""
    assert detect("chat", capped_rows([0] * 6, None), since_s=10.0) is None
    steady = [3400.0, 3300.0, 3500.0, 3350.0, 3450.0, 3300.0]
    assert detect("chat", capped_rows([3, 0, 2, 1, 3, 0], steady), since_s=10.0) is None


def capped_run(cap_ms: float, dispatch_ms: float):
    """100 requests with these lag parts, under a cap of 1,024."""
    late = bucket(
        {"ttft": TTFT_MS, "lag": [cap_ms + dispatch_ms + 1.0] * 100,
         "lag_prepare": [0.5] * 100, "lag_cap": [cap_ms] * 100,
         "lag_dispatch": [dispatch_ms] * 100, "lag_connect": [0.0] * 100,
         "lag_write": [0.5] * 100}
    )  # fmt: skip
    run = run_of({"chat": late}, generator={"max_lag_ms": 50.0})
    run.meta["scenarios"]["chat"]["load"] = {"max_in_flight": 1024}
    return run


def test_a_lag_the_cap_caused_is_invalid_as_the_engine_s_queue_not_a_generator_fault() -> None:
    run = capped_run(30000.0, 3.0)
    causes = cause_p99_ms(run)
    assert next(iter(causes)) == "in_flight_cap" and held_by_cap(causes)
    (reason,) = [r for r in evaluate_run(run).reasons if "lag p99" in r]
    assert reason.startswith(
        "arrivals waited for the in-flight cap of 1024 (load.max_in_flight): lag p99 "
    )
    assert "mostly held by the in-flight cap (p99 " in reason
    assert "not the load generator's fault" in reason
    assert not reason.startswith("load generator")
    findings = diagnose(run)
    assert not [f for f in findings if f.cause == "load generator"]
    (queue,) = [f for f in findings if f.cause == "saturation" and "in-flight cap" in f.text]
    assert queue.evidence["lag_cause_p99_ms"]["in_flight_cap"] == causes["in_flight_cap"]


def test_a_lag_the_dispatcher_itself_caused_still_names_the_generator() -> None:
    run = capped_run(2.0, 300.0)
    (reason,) = [r for r in evaluate_run(run).reasons if "lag p99" in r]
    assert reason.startswith("load generator lag p99 ")
    assert "the lag was mostly dispatcher late" in reason
    assert [f for f in diagnose(run) if f.cause == "load generator"]


def test_the_status_line_shows_the_arrivals_held_back_beside_those_in_flight() -> None:
    from panels import progress

    from slogate.reports.progress import progress_line

    capped = progress_line(progress(in_flight=1024.0, held=2272.0, slos=()))
    assert capped.startswith("[slogate]   20/25s users 8 inflight 1024 held 2272 | 1.64 req/s")
    assert " held " not in progress_line(progress(in_flight=1024.0, slos=()))
