"""--warmup auto: MSER on hand-made series whose cut is checked by hand, the
run's first half kept by segment until the cut is applied, the cut in every
output, and real runs on the simulated engine: a queue filling from cold is
cut, a steady run is not."""

from __future__ import annotations

import pytest
from loadruns import cli, scenario_file, slogate, summary
from reportdata import bucket, request, run_of

from slogate.analysis.measurement.recorder import OVERALL, Recorder
from slogate.analysis.measurement.warmup import METHOD, find_cut, mser_cut, mser_scores
from slogate.engines.simulated import start_engine
from slogate.locustfiles.timeline import HEAD_SEGMENTS, build_timeline
from slogate.reports import write_results
from slogate.scenarios.model import LoadSpec


def test_mser_cuts_a_transient_by_hand() -> None:
    """10, 6, then 2s: MSER(0) = (6.5^2 + 2.5^2 + 6 x 1.5^2) / 8^2 = 62/64;
    MSER(1) = (3.4286^2 + 6 x 0.5714^2) / 7^2 = 13.714/49; MSER(2) = 0 (all
    equal), and later ties are not taken: the cut drops the first two."""
    scores = mser_scores([10, 6, 2, 2, 2, 2, 2, 2])
    assert scores[:3] == [pytest.approx(62 / 64), pytest.approx(13.7143 / 49, rel=1e-4), 0.0]
    assert len(scores) == 5  # d = 0 .. n // 2: the first half only
    assert mser_cut([10, 6, 2, 2, 2, 2, 2, 2]) == 2


def test_mser_keeps_a_steady_series_whole() -> None:
    """3, 5 alternating: MSER(0) = 8/64 = 0.125, MSER(1) = 6.857/49 = 0.140,
    MSER(2) = 6/36 = 0.167, MSER(3) = 4.8/25 = 0.192, MSER(4) = 4/16 = 0.25."""
    scores = mser_scores([3, 5, 3, 5, 3, 5, 3, 5])
    assert scores == [pytest.approx(v, abs=1e-3) for v in (0.125, 0.140, 0.1667, 0.192, 0.25)]
    assert mser_cut([3, 5, 3, 5, 3, 5, 3, 5]) == 0


def rows(scenario: str, key: str, values: list[float], window_s: float = 5.0) -> list[dict]:
    return [
        {"scenario": scenario, "t_s": i * window_s, "window_s": window_s, key: v}
        for i, v in enumerate(values)
    ]


def test_the_run_is_cut_where_its_latest_series_settles() -> None:
    """TTFT settles after two windows (10 s), ITL after one (5 s): cut at 10 s,
    then rounded up to the recorder's 3 s segments: 12 s. A trend still rising
    at half the run is cut at the limit and said not settled; a small drift
    (under 20% of the level) is not cut at all; the window after the run's end
    does not count."""
    series = rows("chat", "ttft_p50_ms", [900, 600, 200, 200, 210, 190, 200, 200])
    series += rows("chat", "itl_p50_ms", [40, 20, 20, 21, 19, 20, 20, 20])
    cut = find_cut(series, ["chat"], segment_s=3.0, until_s=40.0)
    assert cut.series == {"chat:ttft_p50_ms": 10.0, "chat:itl_p50_ms": 5.0}
    assert (cut.found_s, cut.cut_s, cut.settled) == (10.0, 12.0, True)
    rising = find_cut(rows("chat", "ttft_p50_ms", [1, 2, 3, 4, 5, 6, 7, 8]), ["chat"], 5.0, 40.0)
    assert (rising.cut_s, rising.settled) == (20.0, False) and "longer run" in rising.note
    plateau = rows("chat", "ttft_p50_ms", [14, 458, 957, 1430, 1437, 1437, 1438, 1438, 1439, 1439])
    assert find_cut(plateau, ["chat"], 5.0, 50.0).found_s == 15.0  # measured; MSER alone: 25 s
    drift = rows("chat", "ttft_p50_ms", [12, 17, 19, 14, 16, 13, 14, 13])  # measured: steady
    assert find_cut(drift, ["chat"], 5.0, 40.0).cut_s == 0.0
    tail = rows("chat", "ttft_p50_ms", [5, 5, 5, 5, 5, 5, 5, 5, 900])  # t = 40 s: winding down
    assert find_cut(tail, ["chat"], 5.0, 40.0).cut_s == 0.0
    short = find_cut(rows("chat", "ttft_p50_ms", [900, 5, 5]), ["chat"], 5.0, 40.0)
    assert short.cut_s == 0.0 and "fewer than 4 windows" in short.note


def test_the_first_half_is_kept_by_segment_until_the_cut() -> None:
    timeline = build_timeline(LoadSpec(users=1, duration_s=60.0, warmup_auto=True))
    assert (timeline.warmup_s, timeline.head_s, timeline.segment_s) == (0.0, 30.0, 30 / 12)
    assert HEAD_SEGMENTS == 12
    assert [timeline.head_segment(t) for t in (0.0, 2.6, 29.9, 30.0)] == [0, 1, 11, None]
    assert build_timeline(LoadSpec(users=1, duration_s=60.0)).head_segment(1.0) is None
    recorder = Recorder()
    recorder.origin_s = 100.0
    for head, ttft, end_s in ((0, 5000.0, 1.0), (1, 40.0, 2.0), (2, 41.0, 3.0), (None, 42.0, 4.0)):
        recorder.record(request(ttft_ms=ttft), wall_s=100.0 + end_s, head=head)
    assert recorder.buckets[("chat", OVERALL)].counters.ok == 1
    recorder.apply_cut(1, cut_s=1.5)  # the diagnosis leaves the first request out too
    assert list(recorder.timelines.flags["warmup"]) == [1, 0, 0, 0]
    assert list(recorder.buckets) == [("chat", OVERALL)]
    measured = recorder.buckets[("chat", OVERALL)]
    assert measured.counters.ok == 3
    assert measured.histograms.histogram("ttft").get_max_value() < 50_000  # us: 5 s dropped


def test_the_cut_is_in_the_summary_the_report_and_summary_md(tmp_path) -> None:
    chat = bucket({"ttft": [100.0] * 300, "e2e": [900.0] * 300})
    auto = {"method": METHOD, "found_s": 10.0, "cut_s": 12.5, "settled": True, "note": "",
            "series": {"chat:ttft_p50_ms": 10.0, "chat:itl_p50_ms": 0.0}}  # fmt: skip
    run = run_of({"chat": chat}, warmup_s=12.5, warmup_auto=auto)
    run.timeseries = [
        {"scenario": "chat", "t_s": 5.0 * i, "window_s": 5.0, "ttft_p50_ms": 100.0,
         "requests_ok": 10, "requests_failed": 0}
        for i in range(12)
    ]  # fmt: skip
    s = write_results(tmp_path, run).summary
    assert s["run"]["warmup_s"] == 12.5 and s["run"]["warmup_auto"]["found_s"] == 10.0
    report = (tmp_path / "report.html").read_text()
    assert "Warm-up found: 12.50 s" in report and "settled at 10 s" in report
    # on every chart with data: requests per second, TTFT and the error rate here
    assert report.count('<g class="cut"><title>warm-up cut 12.5 s (MSER)</title>') == 3
    assert (
        "Warm-up found (--warmup auto, MSER): 12.50 s cut" in (tmp_path / "summary.md").read_text()
    )
    assert '"WarmupAuto"' in cli("schema", "summary").stdout


def test_warmup_auto_is_a_value_and_anything_else_is_refused(tmp_path) -> None:
    done = cli("scenario", "check", str(scenario_file(tmp_path, "exact-open",
                                                       load={"warmup": "soon"})))  # fmt: skip
    assert done.returncode == 2
    assert "expected auto or a duration" in done.stderr + done.stdout
    ok = cli(
        "scenario", "check", str(scenario_file(tmp_path, "exact-open", load={"warmup": "auto"}))
    )
    assert ok.returncode == 0, ok.stderr


@pytest.fixture(scope="module")
def engine():
    """Four sequences at a time: sixteen users queue behind them."""
    with start_engine("llama-3.1-8b@h100", max_num_seqs=4) as running:
        yield running


def auto_run(tmp_path, engine, name: str, load: dict) -> dict:
    scenario = scenario_file(
        tmp_path,
        "exact-open",
        workload={"kind": "chat", "text": "prose", "input_tokens": 64, "output_tokens": 64,
                  "turns": 1, "think_time_s": 0},
        load={"rate": None, **load, "warmup": "auto"},
        slo={"ttft_ms": {"p50": 600000}},
    )  # fmt: skip
    out = tmp_path / name
    done = slogate("run", str(scenario), "--host", engine.url, "--out", str(out), timeout=240)
    assert done.returncode in (0, 4), done.stderr[-3000:]
    return summary(out)


@pytest.mark.slow
def test_a_cold_queue_is_cut_and_a_steady_run_is_not(tmp_path, engine) -> None:
    """Sixteen users started one a second fill the queue of an engine serving
    four: TTFT climbs from about 15 ms to about 1.4 s over the first 15 s, then
    holds. An open loop at 2/s, which the engine serves without a queue, holds
    from the start."""
    cold = auto_run(tmp_path, engine, "cold", {"users": 16, "spawn_rate": 1, "duration": "50s"})
    cut = cold["run"]["warmup_auto"]
    assert 10.0 <= cut["found_s"] <= 25.0 and cold["run"]["warmup_s"] == cut["cut_s"]
    assert cold["run"]["measured_s"] == pytest.approx(50.0 - cut["cut_s"], abs=1.0)
    measured = cold["scenarios"]["exact-open"]["metrics"]["ttft_ms"]
    assert measured["p50"] > 1000.0  # the queued level, not the cold start's
    steady = auto_run(tmp_path, engine, "steady",
                      {"rate": {"rps": 2, "arrival": "constant"}, "duration": "30s"})  # fmt: skip
    assert steady["run"]["warmup_auto"]["cut_s"] == 0.0 and steady["run"]["warmup_s"] == 0.0
    assert steady["scenarios"]["exact-open"]["requests"]["total"] >= 55  # all 30 s measured
