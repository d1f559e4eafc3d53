"""`slogate scenario check` on a trace replayed at its own times: its burstiness
at each speed-up and whether this machine can send it within the lag bound,
from costs measured here (the prediction's arithmetic worked out by hand)."""

from __future__ import annotations

import json

import pytest
from loadruns import cli

from slogate.locustfiles.replay_cost import LEAD_MS, Costs, predict
from slogate.scenarios.burstiness import Burstiness

# speed 5: 16 arrivals within a millisecond, 32 in the busiest second with 500k prompt tokens
BURSTY = Burstiness(5.0, 16, 18, 17.9, 32, 270_000.0, 500_000.0)


def test_a_replay_holds_when_preparation_and_the_largest_burst_fit():
    # preparation: 32 x 0.1 ms + 500k tokens x 0.5 us = 3.2 ms + 250 ms = 0.2532 of a core;
    # the burst: 16 x 100 us = 1.6 ms after its instant, within 2 ms
    p = predict(BURSTY, Costs(0.1, 0.5, 100.0, 32), bound_ms=2.0)
    assert p.prepare_share == pytest.approx(0.2532)
    assert p.burst_lag_ms == pytest.approx(1.6)
    assert (p.holds, p.processes, p.max_speed) == (True, 1, None)
    assert p.line().startswith("replay at speed 5: holds within 2 ms")


def test_a_burst_too_slow_to_send_asks_for_processes_never_a_lower_speed():
    p = predict(BURSTY, Costs(0.1, 0.5, 100.0, 32), bound_ms=1.0)
    assert (p.holds, p.processes, p.max_speed) == (False, 2, None)  # ceil(1.6 / 1)
    assert p.line().endswith("try --processes 2")


def test_preparation_beyond_half_a_core_asks_for_processes_or_a_lower_speed():
    # 3.2 ms + 500k x 2 us = 1.0032 of a core: ceil(1.0032 / 0.5) = 3 processes,
    # or speed 5 x 0.5 / 1.0032 = 2.49
    p = predict(BURSTY, Costs(0.1, 2.0, 100.0, 32), bound_ms=2.0)
    assert p.prepare_share == pytest.approx(1.0032)
    assert (p.holds, p.processes) == (False, 3)
    assert p.max_speed == pytest.approx(2.4920, abs=1e-4)
    assert "try --processes 3 or speedup 2.5 or less" in p.line()


def test_a_late_wake_up_and_the_set_up_count_only_beyond_the_lead():
    # the burst is handed over 2 ms ahead of its instant: a wake-up 1.5 ms late
    # and 16 x 50 us of set-up overrun it by 0.3 ms, the writes take 1.6: 1.9 ms
    costs = Costs(0.1, 0.5, 100.0, 32, wake_ms=1.5, setup_us=50.0)
    assert LEAD_MS == 2.0
    p = predict(BURSTY, costs, bound_ms=2.0)
    assert p.burst_lag_ms == pytest.approx(1.9)
    assert p.holds
    # 1.8 ms late: 2.2 ms; two processes send 8 each: 0.8 + (1.8 + 0.4 - 2) = 1.0 ms
    p = predict(BURSTY, Costs(0.1, 0.5, 100.0, 32, wake_ms=1.8, setup_us=50.0), bound_ms=2.0)
    assert p.burst_lag_ms == pytest.approx(2.2)
    assert (p.holds, p.processes) == (False, 2)


def test_a_machine_that_wakes_later_than_the_bound_is_named_as_the_cause():
    # 5 ms late, 3 beyond the lead: even one request per process leaves 3.1 ms late
    p = predict(BURSTY, Costs(0.1, 0.5, 100.0, 32, wake_ms=5.0), bound_ms=2.0)
    assert (p.holds, p.processes) == (False, 0)
    assert "wakes a process 5.00 ms late (p99)" in p.line()
    assert p.line().endswith("no flag helps, give the load cores of its own")


def write_trace(tmp_path, speedup: float) -> str:
    # bursts of 4 within 0.6 ms at 0 s and 1 s, singles at 0.5 s and 2 s; prompts 1000 tokens
    times = [0.0, 0.0002, 0.0004, 0.0006, 0.5, 1.0, 1.0001, 1.0002, 1.0003, 2.0]
    rows = "\n".join(f"{t},1000,8" for t in times)
    (tmp_path / "t.csv").write_text(f"time,input_tokens,output_tokens\n{rows}\n")
    (tmp_path / "s.yaml").write_text(
        "name: bursty\napi: chat\nmodel: m\n"
        "workload: {kind: trace, file: t.csv, time_unit: s, text: prose}\n"
        f"load: {{rate: {{arrival: trace, speedup: {speedup}}}, duration: 10s}}\n"
    )
    return str(tmp_path / "s.yaml")


def test_check_reports_a_trace_s_burstiness_at_each_speed(tmp_path):
    done = cli("scenario", "check", write_trace(tmp_path, 3), "--no-measure", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["scenarios"]["bursty"]
    assert found["speed"] == pytest.approx(3.0)
    table = {row["speed"]: row for row in found["burstiness"]}
    assert sorted(table) == [1.0, 2.0, 3.0, 5.0]
    assert {row["per_ms"] for row in table.values()} == {4}  # a burst stays a burst
    # 10 arrivals over 2 s: 5/s at speed 1, 25/s at speed 5; 5,000 prompt tokens/s at speed 1
    assert table[1.0]["arrivals_per_s"] == pytest.approx(5.0)
    assert table[5.0]["arrivals_per_s"] == pytest.approx(25.0)
    assert table[1.0]["prompt_tokens_per_s"] == pytest.approx(5000.0)
    # at speed 5 the singles are 100 ms from the bursts: none joins one within 10 ms
    assert table[5.0]["per_10ms"] == 4
    assert "replay" not in found


def test_a_scenario_without_trace_times_gets_no_replay_check(tmp_path):
    done = cli("scenario", "check", "chat", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scenarios"] == {}


@pytest.mark.slow
def test_check_measures_this_machine_and_predicts_the_replay(tmp_path):
    done = cli("scenario", "check", write_trace(tmp_path, 5), "--max-lag-ms", "10")
    assert done.returncode == 0, done.stderr
    assert "at most 4 within 1 ms" in done.stdout
    assert "this machine: preparing a request" in done.stdout
    assert "a sleeping process wakes" in done.stdout
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("  replay at speed 5: ")
    assert "within 10 ms" in verdict
