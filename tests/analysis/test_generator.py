"""The generator's self-measurement as the analysis reads it: error bounds from
recorded loop delays, the INVALID rule on margins and stalled reads, the
summary and JUnit fields. Recorded data only, no load."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from reportdata import bucket, run_of

from slogate.analysis.documents.summary import build_summary
from slogate.analysis.verdict.generator import (
    ProcessHealth,
    error_bound_ms,
    generator_block,
    held_block,
    likely_cause,
    merged,
)
from slogate.analysis.verdict.slo import Verdict, evaluate_run
from slogate.reports import write_results
from slogate.reports.junit import junit_xml

TTFT_MS = [50.0 + (i % 10) * 0.1 for i in range(2000)]  # p99 50.9 ms
ITL_MS = [20.0] * 4000


def health(delays_ms: dict[float, int], **fields) -> ProcessHealth:
    """A process whose loop was late by each delay (ms) that many milliseconds."""
    h = ProcessHealth(pid=fields.pop("pid", 4242), **fields)
    for delay, count in delays_ms.items():
        h.stall.record_value(int(delay * 1000), count)
    return h


def frozen_30_every_500(seconds: int = 20) -> ProcessHealth:
    """One sample per ms: 470 prompt ones and the 30 of a freeze, every 500 ms."""
    delays = {0.1: 470 * 2 * seconds}
    for ms in range(1, 31):
        delays[float(ms)] = 2 * seconds
    return health(delays, cpu_s=2.0, wall_s=float(seconds))


def judged(h: ProcessHealth | None, slo: list[dict], **counters):
    chat = bucket({"ttft": TTFT_MS, "itl": ITL_MS, "e2e": TTFT_MS})
    for key, value in counters.items():
        setattr(chat.counters, key, value)
    meta = {"generator": {"max_lag_ms": 50.0, "cpu_warning": False}}
    if h is not None:
        meta["generator"]["health"] = {"local": h.to_dict()}
    return run_of({"chat": chat}, slo={"chat": slo}, **meta)


def ttft_p99(limit: float) -> dict:
    return {"metric": "ttft_ms", "stat": "p99", "limit": limit, "kind": "max"}


def itl_p99(limit: float) -> dict:
    return {"metric": "itl_ms", "stat": "p99", "limit": limit, "kind": "max"}


def test_round_trip_and_merge_are_exact():
    a = health({0.1: 1000, 5.0: 10}, gc_collections=[3, 1, 0], gc_max_pause_ns=400_000)
    b = health({0.2: 500, 30.0: 1}, gc_collections=[1, 0, 1], gc_max_pause_ns=900_000)
    a.held_split = b.held_split = True
    a.note_held(5_000_000, running_ns=1_000_000, waiting_ns=3_000_000)
    b.note_held(30_000_000, running_ns=40_000_000, waiting_ns=0)  # capped at the stall
    a.steal_share, b.steal_share = 0.02, 0.05
    a2 = ProcessHealth.from_dict(a.to_dict())
    assert a2.to_dict() == a.to_dict()
    total = merged({"w1": a2, "w2": ProcessHealth.from_dict(b.to_dict())})
    assert total.stall.get_total_count() == 1511
    assert total.gc_collections == [4, 1, 1]
    assert total.gc_max_pause_ns == 900_000
    assert held_block(total) == {
        "total": 35.0,
        "running": 31.0,
        "waiting_for_cpu": 3.0,
        "stopped_or_blocked": 1.0,
        "machine_steal_share": 0.05,  # one machine's steal: the larger window's
    }
    b.held_split = False  # one process could not tell: the merged split is unknown
    assert held_block(merged({"w1": a, "w2": b}))["running"] is None
    assert merged({"w": ProcessHealth()}) is None  # nothing measured: no bound at all


def test_the_bound_of_a_statistic_is_that_statistic_of_the_delays():
    h = frozen_30_every_500()
    assert error_bound_ms(h, 50.0, "p50") == pytest.approx(0.1, abs=0.001)
    assert 24.0 <= error_bound_ms(h, 99.0, "p99") <= 26.0  # 1% of 500 ms: the worst 5
    assert error_bound_ms(h, None, "max") == pytest.approx(30.0, rel=0.001)
    mean = (470 * 0.1 + sum(range(1, 31))) / 500
    assert error_bound_ms(h, None, "mean") == pytest.approx(mean, rel=0.01)


def test_margins_inside_the_bound_are_invalid_outside_it_judged_as_before():
    h = frozen_30_every_500()
    cases = [
        (ttft_p99(65.0), Verdict.INVALID),  # passes by 14.1 ms: within ±25
        (ttft_p99(40.0), Verdict.INVALID),  # fails by 10.9 ms: within ±25
        (ttft_p99(100.0), Verdict.PASS),  # 49 ms of headroom
        (ttft_p99(20.0), Verdict.FAIL),  # 30.9 ms over
    ]
    for threshold, expected in cases:
        verdict = evaluate_run(judged(h, [threshold]))
        (result,) = verdict.results
        assert result.verdict is expected, threshold
        assert 24.0 <= result.generator_error_ms <= 26.0
        if expected is Verdict.INVALID:
            assert verdict.exit_code == 3
            assert "load generator's own error bound" in result.note
            assert any(r.startswith("load generator: its loop stalled") for r in verdict.reasons)
        else:
            assert verdict.reasons == ()


def test_a_generator_that_kept_up_changes_no_verdict():
    prompt = health({0.08: 20_000, 0.3: 300, 1.5: 2}, cpu_s=3.0, wall_s=20.0)
    for threshold in (ttft_p99(52.0), itl_p99(21.0), ttft_p99(50.5)):
        with_health = evaluate_run(judged(prompt, [threshold]))
        without = evaluate_run(judged(None, [threshold]))
        assert with_health.verdict is without.verdict
        assert with_health.results[0].generator_error_ms == pytest.approx(0.3, abs=0.001)
        assert without.results[0].generator_error_ms is None


def test_chunks_read_together_while_stalled_void_itl_when_they_reach_the_limit():
    """2% of the gaps read together: each a 0 and a doubled gap (40 ms) beside it."""
    prompt = health({0.08: 20_000}, cpu_s=3.0, wall_s=20.0)
    itl = [0.0] * 80 + [20.0] * 3840 + [40.0] * 80
    slos = [ttft_p99(100.0), itl_p99(30.0), {**itl_p99(30.0), "stat": "p50"}]

    def verdicts(stalled: int):
        chat = bucket({"ttft": TTFT_MS, "itl": itl})
        chat.counters.chunk_gaps, chat.counters.same_read_gaps = 4000, 80
        chat.counters.same_read_stalled_gaps = stalled
        meta = {"health": {"local": prompt.to_dict()}, "max_lag_ms": 50.0}
        run = evaluate_run(run_of({"chat": chat}, slo={"chat": slos}, generator=meta))
        return [r.verdict for r in run.results], run.results

    # read while the loop was stalled: p99 reads 40 but may truly be 20 (a hidden pass)
    got, results = verdicts(stalled=80)
    assert got == [Verdict.PASS, Verdict.INVALID, Verdict.PASS]
    assert "80 of 4000 chunk gaps (2.00%)" in results[1].note
    assert "anywhere from 20.015 to 40.031 ms" in results[1].note  # HDR bucket tops
    # the same gaps read while the loop was prompt: the engine sent them so, it fails
    got, _ = verdicts(stalled=2)
    assert got == [Verdict.PASS, Verdict.FAIL, Verdict.PASS]


def test_stalled_reads_void_itl_without_a_measured_loop_and_say_only_why():
    """A results folder without the generator's health (an older one, or a run
    stopped before its measured window) whose stalled reads reach the limit:
    the verdict is invalid, and its reasons are the SLO's note alone, no line
    of loop numbers that were never measured."""
    chat = bucket({"ttft": TTFT_MS, "itl": [0.0] * 80 + [20.0] * 3840 + [40.0] * 80})
    chat.counters.chunk_gaps, chat.counters.same_read_gaps = 4000, 80
    chat.counters.same_read_stalled_gaps = 80
    run = run_of({"chat": chat}, slo={"chat": [itl_p99(30.0)]}, generator={"max_lag_ms": 50.0})
    verdict = evaluate_run(run)
    assert verdict.verdict is Verdict.INVALID and verdict.exit_code == 3
    (reason,) = verdict.reasons
    assert reason.startswith("chat: itl_ms p99 <= 30: 80 of 4000 chunk gaps (2.00%) were read")
    summary = build_summary(run)
    assert summary["invalid_reasons"] == [reason]


def test_the_likely_cause_names_collector_cpu_or_outside():
    gc_paused = health({0.1: 1000, 40.0: 1}, gc_max_pause_ns=38_000_000, cpu_s=1, wall_s=10)
    busy = health({0.1: 1000, 40.0: 1}, cpu_s=9.5, wall_s=10)
    outside = health({0.1: 1000, 40.0: 1}, cpu_s=1, wall_s=10)
    for h, words in ((gc_paused, "collector"), (busy, "own CPU (0.95"), (outside, "outside")):
        assert words in likely_cause({"p": h}, h)
    stopped = health({0.1: 1000, 40.0: 1}, cpu_s=1, wall_s=10, held_split=True)
    stopped.note_held(40_000_000, running_ns=2_000_000, waiting_ns=1_000_000)
    assert likely_cause({"p": stopped}, stopped) == (
        "neither running nor waiting: stopped (SIGSTOP), blocked in the kernel or its core "
        "taken by a hypervisor (37.0 of 40.0 ms the loop was held: running 2.0 ms, waiting "
        "for a core 1.0 ms, neither 37.0 ms)"
    )
    stopped.steal_share = 0.125
    assert likely_cause({"p": stopped}, stopped).endswith(
        "neither 37.0 ms; the hypervisor took 12.5% of the machine's CPU time)"
    )


def test_a_collector_pause_spent_waiting_for_a_core_is_not_named_the_collector():
    """Issue 23's vLLM run: the generator waited 10.7 s of the 11.2 s its loop
    was held for a core vLLM's threads had, and a collector pass (310 ms, of a
    worst stall of 400 ms) was stretched by the same wait."""

    def vllm_run() -> ProcessHealth:
        h = health({0.1: 60_000, 400.0: 1}, gc_max_pause_ns=310_000_000, cpu_s=9, wall_s=60)
        h.held_split = True
        h.note_held(11_200_000_000, running_ns=420_000_000, waiting_ns=10_700_000_000)
        return h

    waited = vllm_run()
    assert likely_cause({"p": waited}, waited) == (
        "waiting for a core that other processes had (10700.0 of 11200.0 ms the loop was "
        "held: running 420.0 ms, waiting for a core 10700.0 ms, neither 80.0 ms)"
    )
    # the same pause on a loop that was running its own work: that is the collector
    ran = health({0.1: 60_000, 400.0: 1}, gc_max_pause_ns=310_000_000, cpu_s=9, wall_s=60)
    ran.held_split = True
    ran.note_held(1_200_000_000, running_ns=1_100_000_000, waiting_ns=30_000_000)
    assert likely_cause({"p": ran}, ran).startswith(
        "the cyclic collector's pauses (the loop's own work) (1100.0 of 1200.0 ms"
    )
    # running most of it with short collector passes: the loop's own work, not the collector
    ran.gc_max_pause_ns = 20_000_000
    assert likely_cause({"p": ran}, ran).startswith("its own work on the loop (1100.0 of")


def test_summary_junit_and_report_carry_the_bound_and_the_invalid_verdict(tmp_path):
    frozen = frozen_30_every_500()
    frozen.held_split = True
    frozen.note_held(1_200_000_000, running_ns=100_000_000, waiting_ns=300_000_000)
    frozen.steal_share = 0.031
    run = judged(frozen, [ttft_p99(65.0), itl_p99(200.0)])
    summary = build_summary(run)
    g = summary["generator"]
    assert "health" not in g  # the encoded histograms stay in data/, not in the summary
    assert set(g["loop_stall_ms"]) == {"p50", "p99", "max", "mean", "samples"}
    assert g["loop_stall_ms"]["samples"] == 20_000
    assert g["error_bound_ms"]["ttft_ms"]["p99"] == g["loop_stall_ms"]["p99"]
    assert g["per_process"]["local"]["pid"] == 4242
    assert g["per_process"]["local"]["cpu_share"] == 0.1
    assert summary == build_summary(run)  # deterministic
    assert summary["verdict"] == "invalid" and summary["exit_code"] == 3
    assert summary["slo_counts"] == {"pass": 1, "fail": 0, "inconclusive": 0, "invalid": 1}
    entry = summary["scenarios"]["chat"]["slo"][0]
    assert entry["verdict"] == "invalid" and entry["generator_error_ms"] > abs(entry["margin"])
    root = ET.fromstring(junit_xml(summary))
    errors = [e.get("type") for e in root.iter("error")]
    assert "SLOInvalid" in errors and "InvalidRun" in errors
    assert generator_block({"generator": {}}) == {}  # older results folders: no block
    write_results(tmp_path, run)
    page = (tmp_path / "report.html").read_text()
    assert 'id="generator"' in page
    bound = f"± {g['error_bound_ms']['ttft_ms']['p99']:.2f} ms"
    assert page.count(bound) >= 3  # beside both latency verdicts, and per process
    assert "within the load generator&#39;s own error bound" in page
    assert g["loop_held_ms"]["stopped_or_blocked"] == 800.0
    assert g["loop_held_ms"]["machine_steal_share"] == 0.031
    assert "running 100, waiting for a core 300, neither 800; the hypervisor took 3.1%" in page
    bounds = {
        sample.labels["quantile"]: sample.value
        for family in text_string_to_metric_families((tmp_path / "metrics.prom").read_text())
        if family.name == "slogate_generator_error_bound_seconds"
        for sample in family.samples
    }
    assert bounds["0.99"] == pytest.approx(g["error_bound_ms"]["ttft_ms"]["p99"] / 1000)
    assert set(bounds) == {"0.5", "0.9", "0.95", "0.99", "0.999"}
