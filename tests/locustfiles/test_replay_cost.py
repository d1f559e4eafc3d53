"""`slogate scenario check` on a trace replayed at its own times: its burstiness
at each speed-up and whether this machine can send it within the lag bound,
from costs measured here (the prediction's arithmetic worked out by hand)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from loadruns import cli

from slogate.locustfiles.replay_cost import REPLAYS, Costs, likely_lag_ms, predict, replay_lags_ms
from slogate.scenarios.burstiness import burstiness

# preparing: 0.1 ms + 0.5 us per token; a send: 50 us of set-up, 100 us to write
COSTS = Costs(0.1, 0.5, 100.0, 32, setup_us=50.0, wakes_ms=(0.0,))


def late_waker(ms: float) -> Costs:
    """COSTS on a machine that wakes every sleep ``ms`` late."""
    return Costs(0.1, 0.5, 100.0, 32, setup_us=50.0, wakes_ms=(ms,))


def test_a_burst_handed_over_ahead_leaves_its_writes_one_after_another():
    # 40 ms of quiet: the burst of 4 is handed over 2 ms ahead and set up in
    # 0.2 ms; at its instant each writes in 100 us, in turn
    lags = replay_lags_ms(np.array([0.040] * 4), COSTS)
    assert lags == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_a_wake_up_late_beyond_the_lead_makes_the_group_late_once_then_is_woken_early():
    # woken 3 ms late, 1 ms past the 2 ms lead: handed over at +1 ms, set up by
    # +1.2 ms, writes to +1.3 .. +1.6 ms. 100 ms later the dispatcher stops
    # sleeping 3 ms before the lead (its last wake-up): on time
    lags = replay_lags_ms(np.array([0.040] * 4 + [0.140]), late_waker(3.0))
    assert lags == pytest.approx([1.3, 1.4, 1.5, 1.6, 0.1])


def test_a_single_close_after_another_has_a_tenth_of_the_gap_for_a_late_wake_up():
    # 10 ms after the instant before: a lead of 0.5 ms (a twentieth) and a
    # margin of 0.5 ms (a tenth, less the lead) against a wake-up 3 ms late:
    # handed over 2 ms after its instant, set up by 2.05, written by 2.15 (the
    # first, alone, as the group above: 1 + 0.05 + 0.1 ms)
    lags = replay_lags_ms(np.array([0.040, 0.140, 0.150]), late_waker(3.0))
    assert lags == pytest.approx([1.15, 0.1, 2.15])


def test_instants_within_the_lead_of_a_groups_first_go_with_it():
    # 0.5 ms apart: one group, handed over together 2 ms before the first;
    # the second waits at its own gate: each writes 100 us after its instant
    lags = replay_lags_ms(np.array([0.040, 0.0405]), COSTS)
    assert lags == pytest.approx([0.1, 0.1])


def test_a_rare_late_wake_up_counts_though_most_replays_draw_none():
    # one wake-up in 100 is 12 ms late: the margin (the recent wake-ups, on time)
    # is 0 and the lead 2 ms, so the single is handed over 10 ms late and written
    # by 10.15 ms (set up 0.05, written 0.1). A replay of 50 singles draws it with
    # a chance of 1 - 0.99^50 = 0.39, its p99 then at least 0.1 + 0.51 x 10.05 =
    # 5.2255 ms; the prediction takes the p99 nine replays in ten stay within
    singles = np.arange(1, 51) * 0.2
    costs = Costs(0.1, 0.5, 100.0, 32, setup_us=50.0, wakes_ms=(0.0,) * 99 + (12.0,))
    replays = [replay_lags_ms(singles, costs, seed) for seed in range(REPLAYS)]
    assert {round(float(lags.max()), 3) for lags in replays} == {0.1, 10.15}
    assert np.median([np.percentile(lags, 99) for lags in replays]) == pytest.approx(0.1)
    p99, most = likely_lag_ms(singles, costs)
    assert (p99, most) == pytest.approx((5.2255, 10.15))  # 6 of the 20 drew it


# A trace of 20 bursts of 16 within 0.15 ms, one every 2 s
BURSTS = np.array([second + 0.00001 * k for second in range(2, 42, 2) for k in range(16)])


def prediction(costs: Costs, bound_ms: float, speed: float = 1.0, tokens: float = 13_000):
    at_speed = burstiness(BURSTS, np.full(len(BURSTS), tokens), speed)
    return predict(at_speed, BURSTS, costs, bound_ms)


def test_a_replay_holds_when_preparation_and_its_lag_fit():
    # preparation: 16 x 0.1 ms + 208k tokens x 0.5 us = 1.6 + 104 ms = 0.1056 of a
    # core; the burst's writes, 100 us each: the kth (from 0) is written 0.1 (k + 1)
    # ms after the first's instant, 0.01 k after its own: 0.1 + 0.09 k ms late, the
    # last 1.45 ms (p99 too: the 20 bursts are alike)
    p = prediction(COSTS, bound_ms=2.0)
    assert p.prepare_share == pytest.approx(0.1056)
    assert p.lag_p99_ms == pytest.approx(1.45)
    assert p.lag_max_ms == pytest.approx(1.45)
    assert (p.holds, p.processes, p.max_speed) == (True, 1, None)
    assert p.line().startswith("replay at speed 1: holds within 2 ms")


def test_a_burst_too_slow_to_send_asks_for_processes_never_a_lower_speed():
    # 1.45 ms over a 1 ms bound; two processes send 8 each, 20 us apart: the last
    # 0.1 + 7 x 0.08 = 0.66 ms late
    p = prediction(COSTS, bound_ms=1.0)
    assert replay_lags_ms(BURSTS[::2], COSTS).max() == pytest.approx(0.66)
    assert (p.holds, p.processes, p.max_speed) == (False, 2, None)
    assert p.line().endswith("try --processes 2")


def test_preparation_beyond_half_a_core_asks_for_processes_or_a_lower_speed():
    # 1.6 ms + 16 x 130k tokens x 0.5 us = 1.0416 of a core: ceil(1.0416 / 0.5)
    # = 3 processes, or speed 1 x 0.5 / 1.0416 = 0.48
    p = prediction(COSTS, bound_ms=2.0, tokens=130_000)
    assert p.prepare_share == pytest.approx(1.0416)
    assert (p.holds, p.processes) == (False, 3)
    assert p.max_speed == pytest.approx(0.48003, abs=1e-4)
    assert "try --processes 3 or speedup 0.48 or less" in p.line()


def test_a_machine_that_wakes_later_than_any_lead_and_margin_is_named_as_the_cause():
    # singles 4 ms apart, woken 5 ms late: a lead and a margin of 0.2 ms each
    # leave a single that slept handed over 4.6 ms after its instant, written
    # by 4.75; the next, due while that one was sent, goes without a sleep
    # (0.75 + 0.15 ms late). No burst to share among processes
    singles = np.arange(1, 21) * 0.004
    at_speed = burstiness(singles, np.full(len(singles), 100), 1.0)
    p = predict(at_speed, singles, late_waker(5.0), bound_ms=2.0)
    assert replay_lags_ms(singles, late_waker(5.0))[1:5] == pytest.approx([4.75, 0.9] * 2)
    assert p.lag_p99_ms == pytest.approx(4.75)
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
