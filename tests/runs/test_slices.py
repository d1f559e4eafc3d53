"""--slice: percentiles and SLO verdicts per slice of the run, in every output, and
a real run cut into slices of whole windows."""

from __future__ import annotations

import pytest
from loadruns import cli, scenario_file, slogate, summary
from reportdata import bucket, realistic_run

from slogate.engines.exact import ExactEngine
from slogate.reports import write_results


def test_each_slice_is_judged_alone_and_shown_everywhere(tmp_path) -> None:
    """Two 30 s slices of the realistic chat run (TTFT p99 <= 2000 ms): the first
    answers in 100 ms, the second in 3000 ms, so it alone fails that SLO."""
    run = realistic_run(n=2000, seed=3)
    run.meta["slice_s"] = 30.0
    run.meta["warmup_s"] = 10.0
    fast = {"ttft": [100.0] * 1000, "itl": [20.0] * 1000, "e2e": [500.0] * 1000}
    slow = {"ttft": [3000.0] * 1000, "itl": [20.0] * 1000, "e2e": [3500.0] * 1000}
    run.buckets[("chat", "slice:0")] = bucket(fast)
    run.buckets[("chat", "slice:1")] = bucket(slow)
    outcome = write_results(tmp_path, run)
    slices = outcome.summary["scenarios"]["chat"]["slices"]
    assert [(sl["start_s"], sl["end_s"]) for sl in slices] == [(0.0, 30.0), (30.0, 60.0)]
    assert slices[0]["metrics"]["ttft_ms"]["p99"] == pytest.approx(100.0, rel=1e-3)
    assert slices[1]["metrics"]["ttft_ms"]["p99"] == pytest.approx(3000.0, rel=1e-3)
    assert slices[0]["throughput"]["requests_per_s"] == pytest.approx(1000 / 30, abs=1e-3)
    ttft = {sl["index"]: next(r for r in sl["slo"] if r["name"] == "ttft_ms p99 <= 2000")
            for sl in slices}  # fmt: skip
    assert (ttft[0]["verdict"], ttft[1]["verdict"]) == ("pass", "fail")
    assert slices[1]["verdict"] == "fail" and outcome.summary["run"]["slice_s"] == 30.0
    report = (tmp_path / "report.html").read_text()
    assert "Slices of 30 s" in report and '0 s <span class="muted">(warm-up)</span>' in report
    assert "ttft_ms p99 &lt;= 2000 (fail)" in report
    assert "chat by slice: 0-30 s pass, 30-60 s fail" in (tmp_path / "summary.md").read_text()
    metrics = (tmp_path / "metrics.prom").read_text()
    assert 'slice_start_seconds="30",slogate_slice_verdict="fail"} 1.0' in metrics


@pytest.mark.slow
def test_a_slice_that_is_not_whole_windows_is_refused_before_any_load(tmp_path) -> None:
    scenario = scenario_file(tmp_path, "exact-open")
    with ExactEngine() as engine:
        done = slogate("run", str(scenario), "--host", engine.url, "--slice", "7s",
                       "--out", str(tmp_path / "out"))  # fmt: skip
        assert not engine.truth()  # refused before any request
    assert done.returncode == 2
    assert "--slice 7s: expected a multiple of --window (5s)" in done.stderr
    assert cli("schema", "summary").stdout.count('"SliceSummary"') >= 1


@pytest.mark.slow
def test_a_real_run_is_cut_into_slices_of_whole_windows(tmp_path) -> None:
    scenario = scenario_file(tmp_path, "exact-open", load={"rate": {"rps": 20}, "duration": "12s"})
    with ExactEngine({"ttft_ms": 20, "itl_ms": 10}) as engine:
        done = slogate("run", str(scenario), "--host", engine.url, "--out", str(tmp_path / "out"),
                       "--window", "2", "--slice", "4s")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    s = summary(tmp_path / "out")
    slices = s["scenarios"]["exact-open"]["slices"]
    assert [sl["start_s"] for sl in slices][:3] == [0.0, 4.0, 8.0]
    total = sum(sl["requests"]["total"] for sl in slices)
    assert total == s["scenarios"]["exact-open"]["requests"]["total"]  # no warm-up here
    assert all(sl["verdict"] == "pass" for sl in slices[:3])
    assert slices[1]["requests"]["total"] == pytest.approx(80, abs=8)  # 4 s at 20/s
    throughput = s["scenarios"]["exact-open"]["throughput"]  # no per-request limits: all good
    assert throughput["goodput_tokens_per_s"] == throughput["output_tokens_per_s"] > 0
