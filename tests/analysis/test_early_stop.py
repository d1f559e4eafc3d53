"""--abort-on-fail's rule on hand-checked numbers: only a failure that more samples
cannot turn into a pass stops a run, and never before the minimum window."""

from __future__ import annotations

from reportdata import bucket

from slogate.analysis.verdict.early_stop import early_stop, settled_failure
from slogate.analysis.verdict.slo import Verdict, evaluate
from slogate.scenarios.model import Threshold

# TTFT 1, 2, ..., 1000 ms: the median is 500 ms and its 95% interval runs between
# the order statistics 500 -+ 1.96 * sqrt(1000 / 4) = 500 -+ 31, about 469..531 ms.
UNIFORM = bucket({"ttft": [float(ms) for ms in range(1, 1001)]})


def median_under(limit: float):
    return evaluate("chat", Threshold("ttft_ms", "p50", limit), UNIFORM, 60.0)


def test_a_median_fails_for_good_only_when_its_whole_interval_is_beyond_the_limit() -> None:
    far = median_under(450.0)
    assert far.verdict is Verdict.FAIL and 465 < far.lower < 473 and far.lower > 450
    assert settled_failure(far)
    near = median_under(480.0)  # 500 fails, but the interval reaches down to about 469
    assert near.verdict is Verdict.FAIL and near.lower < 480
    assert not settled_failure(near)
    assert not settled_failure(median_under(600.0))  # a pass is never settled


def test_rates_settle_on_the_exact_binomial_interval() -> None:
    """10 failures in 100: Clopper-Pearson 95% is 0.0490..0.1762; 50 good in 100: 0.398..0.602."""
    errors = bucket({"e2e": [10.0] * 90}, failed={"http_5xx": 10})
    assert settled_failure(evaluate("s", Threshold("error_rate", "rate", 0.04), errors, 60.0))
    assert not settled_failure(evaluate("s", Threshold("error_rate", "rate", 0.05), errors, 60.0))
    half = bucket({"e2e": [10.0] * 100}, good=50)
    goodput = Threshold("goodput", "fraction", 0.7, "min")
    assert settled_failure(evaluate("s", goodput, half, 60.0))  # upper 0.602 < 0.7
    assert not settled_failure(
        evaluate("s", Threshold("goodput", "fraction", 0.6, "min"), half, 60.0)
    )


def test_a_maximum_beyond_its_limit_is_settled_a_mean_never_is() -> None:
    b = bucket({"e2e": [100.0, 200.0, 600.0]})
    assert settled_failure(evaluate("s", Threshold("e2e_ms", "max", 500.0), b, 1.0))
    mean = evaluate("s", Threshold("e2e_ms", "mean", 250.0), b, 1.0)
    assert mean.verdict is Verdict.FAIL and not settled_failure(mean)


def test_nothing_stops_before_the_minimum_window_and_the_reason_names_the_slo() -> None:
    results = [median_under(600.0), median_under(450.0)]
    assert early_stop(results, elapsed_s=12.0, measured_s=9.9, min_window_s=10.0) is None
    stop = early_stop(results, elapsed_s=12.5, measured_s=10.5, min_window_s=10.0)
    assert stop is not None and stop.slo == "ttft_ms p50 <= 450" and stop.scenario == "chat"
    assert stop.at_s == 12.5 and stop.measured_s == 10.5
    assert stop.reason.startswith("chat: ttft_ms p50 <= 450 failed for good after 10 s measured:")
    assert "on 1000 samples, 95% interval 4" in stop.reason and "entirely beyond" in stop.reason
    assert early_stop([median_under(480.0)], 30.0, 30.0, 10.0) is None


def test_a_stopped_run_says_when_and_why_in_every_output(tmp_path) -> None:
    from reportdata import realistic_run

    from slogate.reports import write_results

    run = realistic_run(n=2000, seed=5)
    reason = "chat: ttft_ms p99 <= 2000 failed for good after 12 s measured: ..."
    run.meta["stopped_early"] = {"at_s": 14.0, "measured_s": 12.0, "scenario": "chat",
                                 "slo": "ttft_ms p99 <= 2000", "reason": reason}  # fmt: skip
    outcome = write_results(tmp_path, run)
    assert outcome.summary["run"]["stopped_early"]["at_s"] == 14.0
    assert "Stopped early</b> by --abort-on-fail at 14 s" in (tmp_path / "report.html").read_text()
    assert "Stopped early (--abort-on-fail) at 14 s" in (tmp_path / "summary.md").read_text()
    metrics = (tmp_path / "metrics.prom").read_text()
    assert "slogate_stopped_early_at_seconds{" in metrics and "} 14.0" in metrics
