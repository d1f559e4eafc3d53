"""SLO verdicts on hand-built histograms: pass, fail, inconclusive, invalid runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from reportdata import bucket, run_of

from slogate.analysis.measurement.percentiles import binomial_quantile, min_samples
from slogate.analysis.measurement.recorder import Bucket, Counters
from slogate.analysis.verdict.slo import (
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_INVALID,
    EXIT_PASS,
    Verdict,
    evaluate,
    evaluate_acceptance,
    evaluate_run,
    percentile_of_stat,
    proportion_interval,
    thresholds_of,
)
from slogate.scenarios.model import Threshold

UNIFORM_MS = [float(v) for v in range(1, 1001)]  # 1..1000 ms: p99 is 990 ms


def ttft(stat: str, limit: float, kind: str = "max") -> Threshold:
    return Threshold("ttft_ms", stat, limit, kind)  # type: ignore[arg-type]  # str for the literals


@pytest.mark.parametrize(
    ("stat", "expected"),
    [("p50", 50.0), ("p9", 9.0), ("p99", 99.0), ("p999", 99.9), ("p9999", 99.99), ("p99.5", 99.5)],
)
def test_percentile_names(stat: str, expected: float) -> None:
    assert percentile_of_stat(stat) == pytest.approx(expected)


def test_non_percentile_stats_and_bad_percentiles() -> None:
    assert percentile_of_stat("max") is None
    assert percentile_of_stat("mean") is None
    for bad in ("p100", "p0", "p123"):
        with pytest.raises(ValueError, match=bad):
            percentile_of_stat(bad)


def test_p99_passes_with_margin_and_interval() -> None:
    result = evaluate("chat", ttft("p99", 1000.0), bucket({"ttft": UNIFORM_MS}), 60.0)
    assert result.verdict is Verdict.PASS
    assert result.value == pytest.approx(990.0, rel=1e-3)
    assert result.margin == pytest.approx(10.0, abs=1.0)
    assert result.margin_pct == pytest.approx(1.0, abs=0.1)
    assert result.lower <= result.value <= result.upper
    assert result.lower >= 980.0 and result.upper <= 1000.0
    assert result.count == 1000


def test_p99_fails_on_the_point_estimate_with_negative_margin() -> None:
    result = evaluate("chat", ttft("p99", 900.0), bucket({"ttft": UNIFORM_MS}), 60.0)
    assert result.verdict is Verdict.FAIL
    assert result.margin == pytest.approx(-90.0, abs=1.0)
    assert result.margin_pct == pytest.approx(-10.0, abs=0.2)


def test_too_few_samples_for_p99_is_inconclusive_and_says_how_many() -> None:
    result = evaluate("chat", ttft("p99", 100.0), bucket({"ttft": [10.0] * 50}), 60.0)
    needed = min_samples(0.99)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.needed == needed
    assert result.upper is None
    assert str(needed) in result.note


def test_few_samples_all_far_above_the_limit_still_fail() -> None:
    result = evaluate("chat", ttft("p99", 100.0), bucket({"ttft": [500.0] * 50}), 60.0)
    assert result.verdict is Verdict.FAIL
    assert result.lower is not None and result.lower > 100.0


def test_no_samples_is_inconclusive() -> None:
    result = evaluate("chat", ttft("p95", 100.0), Bucket(), 60.0)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.count == 0
    assert result.needed == min_samples(0.95)


def test_max_and_mean() -> None:
    b = bucket({"e2e": [100.0, 200.0, 600.0]})
    assert evaluate("s", Threshold("e2e_ms", "max", 500.0), b, 1.0).verdict is Verdict.FAIL
    mean = evaluate("s", Threshold("e2e_ms", "mean", 400.0), b, 1.0)
    assert mean.verdict is Verdict.PASS
    assert mean.value == pytest.approx(300.0, rel=1e-3)


def test_error_rate_uses_the_exact_binomial_interval() -> None:
    from scipy.stats import binomtest  # here, not at the top: seconds of collection

    b = bucket({"e2e": [10.0] * 97}, failed={"http_5xx": 3})
    result = evaluate("s", Threshold("error_rate", "max", 0.01), b, 60.0)
    exact = binomtest(3, 100).proportion_ci(confidence_level=0.95, method="exact")
    assert result.verdict is Verdict.FAIL
    assert result.value == pytest.approx(0.03)
    assert result.lower == pytest.approx(exact.low)
    assert result.upper == pytest.approx(exact.high)
    assert result.count == 100


def test_goodput_counts_errors_as_misses() -> None:
    b = bucket({"e2e": [10.0] * 100}, good=90, failed={"timeout_stall": 10})
    result = evaluate("s", Threshold("goodput", "fraction", 0.8, "min"), b, 60.0)
    assert result.value == pytest.approx(90 / 110)
    assert result.verdict is Verdict.PASS
    strict = evaluate("s", Threshold("goodput", "fraction", 0.85, "min"), b, 60.0)
    assert strict.verdict is Verdict.FAIL
    assert strict.margin < 0


def test_goodput_minimum_from_the_goodput_block() -> None:
    meta = {"slo": [], "goodput": {"min_fraction": 0.95, "ttft_ms": 2000}}
    assert thresholds_of("s", meta) == [Threshold("goodput", "fraction", 0.95, "min")]
    explicit = {"slo": [{"metric": "goodput", "stat": "min", "limit": 0.9, "kind": "min"}]}
    assert len(thresholds_of("s", {**explicit, "goodput": {"min_fraction": 0.95}})) == 1


def test_throughput_minimums_over_the_measured_window() -> None:
    b = bucket({"e2e": [10.0] * 600}, output_tokens=60_000)
    rps = Threshold("requests_per_s", "min", 10.0, "min")
    assert evaluate("s", rps, b, 60.0).verdict is Verdict.PASS
    assert evaluate("s", rps, b, 61.0).verdict is Verdict.FAIL
    tokens = evaluate("s", Threshold("output_tokens_per_s", "min", 1000.0, "min"), b, 60.0)
    assert tokens.value == pytest.approx(1000.0)
    assert evaluate("s", rps, b, None).verdict is Verdict.INCONCLUSIVE


def test_unknown_metric_and_bad_thresholds_name_the_scenario() -> None:
    with pytest.raises(ValueError, match=r"'chat'.*'latency_ms'"):
        evaluate("chat", Threshold("latency_ms", "p99", 1.0), Bucket(), 1.0)
    with pytest.raises(ValueError, match=r"'chat'.*'p77x'"):
        evaluate("chat", ttft("p77x", 1.0), bucket({"ttft": [1.0]}), 1.0)
    with pytest.raises(ValueError, match=r"'chat': slo\[0\]"):
        thresholds_of("chat", {"slo": [{"metric": "ttft_ms", "limit": 1.0}]})


def slo(limit: float) -> dict:
    return {"metric": "ttft_ms", "stat": "p99", "limit": limit, "kind": "max"}


def test_run_verdict_fail_beats_inconclusive_beats_pass() -> None:
    ok = bucket({"ttft": UNIFORM_MS})
    few = bucket({"ttft": [5.0] * 20})
    passing = run_of({"a": ok}, slo={"a": [slo(2000.0)]})
    assert evaluate_run(passing).verdict is Verdict.PASS
    assert evaluate_run(passing).exit_code == EXIT_PASS
    undecided = run_of({"a": ok, "b": few}, slo={"a": [slo(2000.0)], "b": [slo(2000.0)]})
    assert evaluate_run(undecided).verdict is Verdict.INCONCLUSIVE
    assert evaluate_run(undecided).exit_code == EXIT_INCONCLUSIVE
    failing = run_of({"a": ok, "b": few}, slo={"a": [slo(500.0)], "b": [slo(2000.0)]})
    verdict = evaluate_run(failing)
    assert verdict.verdict is Verdict.FAIL
    assert verdict.exit_code == EXIT_FAIL
    assert verdict.worst is not None and verdict.worst.scenario == "a"


def test_worst_is_the_deepest_failure_else_the_least_headroom() -> None:
    b = bucket({"ttft": UNIFORM_MS, "e2e": UNIFORM_MS})
    failing = run_of(
        {"a": b},
        slo={"a": [slo(980.0), {"metric": "e2e_ms", "stat": "p50", "limit": 100.0}]},
    )
    assert evaluate_run(failing).worst.threshold.metric == "e2e_ms"
    passing = run_of({"a": b}, slo={"a": [slo(5000.0), slo(1000.0)]})
    assert evaluate_run(passing).worst.threshold.limit == 1000.0


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"complete": False, "incomplete_reason": "engine down"}, "engine down"),
        ({"generator": {"lag_p99_ms": 80.0, "max_lag_ms": 50.0}}, "lag p99 80.0 ms"),
        ({"generator": {"cpu_warning": True}}, "CPU"),
    ],
)
def test_untrustworthy_runs_are_invalid_even_when_slos_pass(meta: dict, reason: str) -> None:
    run = run_of({"a": bucket({"ttft": UNIFORM_MS})}, slo={"a": [slo(5000.0)]}, **meta)
    verdict = evaluate_run(run)
    assert verdict.verdict is Verdict.INVALID
    assert verdict.exit_code == EXIT_INVALID
    assert any(reason in r for r in verdict.reasons)


def test_lag_from_the_histograms_when_the_load_side_did_not_report_it() -> None:
    lagging = bucket({"ttft": UNIFORM_MS, "lag": [200.0] * 100})
    run = run_of({"a": lagging}, generator={"max_lag_ms": 50.0})
    assert evaluate_run(run).verdict is Verdict.INVALID


def test_zero_requests_is_never_a_pass() -> None:
    empty = run_of({"a": Bucket()})
    assert evaluate_run(empty).verdict is Verdict.INVALID
    assert "no request was measured" in evaluate_run(empty).reasons
    assert evaluate_run(run_of({})).verdict is Verdict.INVALID
    mixed = run_of({"a": bucket({"ttft": UNIFORM_MS}), "b": Bucket()})
    verdict = evaluate_run(mixed)
    assert verdict.scenarios["b"] is Verdict.INCONCLUSIVE
    assert verdict.verdict is Verdict.INCONCLUSIVE


@pytest.mark.slow
@pytest.mark.parametrize(("percentile", "n"), [(90.0, 500), (99.0, 2000)])
def test_interval_covers_the_true_quantile_of_an_exponential(percentile: float, n: int) -> None:
    """Over repeated samples, the 95% interval must hold the true quantile about 95%
    of the time (order-statistic intervals are conservative: at least that)."""
    mean_ms = 100.0
    q = percentile / 100.0
    truth = -mean_ms * math.log(1.0 - q)
    rng = np.random.default_rng(12345)
    threshold = ttft(f"p{percentile:g}", 1e9)
    repetitions, covered, widths = 200, 0, []
    for _ in range(repetitions):
        result = evaluate("s", threshold, bucket({"ttft": rng.exponential(mean_ms, n)}), 1.0)
        covered += result.lower <= truth <= result.upper
        widths.append((result.upper - result.lower) / truth)
    assert covered / repetitions >= 0.92
    assert float(np.mean(widths)) < 0.35


def test_a_run_where_every_request_failed_is_invalid_even_without_slos():
    from slogate.analysis.documents.rundata import RunData
    from slogate.analysis.measurement.recorder import Bucket
    from slogate.analysis.verdict.slo import Verdict, evaluate_run

    bucket = Bucket()
    for _ in range(20):
        bucket.counters.note_error("http_5xx", "HTTP 500")
    run = RunData(
        meta={"complete": True, "scenarios": {"s": {"slo": []}}}, buckets={("s", "all"): bucket}
    )
    verdict = evaluate_run(run)
    assert verdict.verdict is Verdict.INVALID
    assert verdict.exit_code == 3
    assert "all 20 measured requests failed" in verdict.reasons[0]


@pytest.mark.parametrize("n", [1, 7, 37, 100, 1_000, 54_321])
@pytest.mark.parametrize("p", [0.01, 0.5, 0.9, 0.95, 0.99, 0.999])
@pytest.mark.parametrize("q", [0.0005, 0.025, 0.5, 0.975, 0.9995])
def test_the_binomial_quantile_is_scipy_stats_binom_ppf(n: int, p: float, q: float) -> None:
    """Computed from scipy.special; equal to scipy.stats' except where the CDF
    meets q exactly and the two round its last bit differently."""
    from scipy.stats import binom

    expected = int(binom.ppf(q, n, p))
    got = binomial_quantile(q, n, p)
    assert got == expected or abs(binom.cdf(min(got, expected), n, p) - q) < 1e-12


def test_the_proportion_interval_is_clopper_pearson() -> None:
    from scipy.stats import beta

    for hits, n in ((1, 10), (5, 100), (99, 100), (3, 100_000)):
        lower, upper = proportion_interval(hits, n)
        assert lower == pytest.approx(beta.ppf(0.025, hits, n - hits + 1), rel=1e-12)
        assert upper == pytest.approx(beta.ppf(0.975, hits + 1, n - hits), rel=1e-12)


def test_a_lag_over_its_bound_names_the_part_of_the_lag_with_the_largest_p99() -> None:
    # 100 requests: lag 60 ms each = prepared late 55 + dispatcher 3 + connect 0 + write 2;
    # a second scenario's requests were late only by their writes (8 ms)
    late = bucket(
        {"ttft": UNIFORM_MS[:100], "lag": [60.0] * 100, "lag_prepare": [55.0] * 100,
         "lag_dispatch": [3.0] * 100, "lag_connect": [0.0] * 100, "lag_write": [2.0] * 100}
    )  # fmt: skip
    writes = bucket({"ttft": UNIFORM_MS[:100], "lag": [8.0] * 100, "lag_write": [8.0] * 100})
    run = run_of({"a": late, "b": writes}, generator={"max_lag_ms": 50.0})
    (reason,) = [r for r in evaluate_run(run).reasons if "lag p99" in r]
    assert reason.endswith(
        "the lag was mostly prepared late (p99 55.0 ms; write 8.0 ms, dispatcher late 3.0 ms, "
        "connect 0.0 ms)"
    )


def test_the_acceptance_slo_judges_the_replies_counts() -> None:
    threshold = Threshold("spec_acceptance_rate", "rate", 0.6, "min")
    counters = Counters(spec_reported=3, draft_tokens=200, accepted_tokens=130)
    result = evaluate_acceptance("chat", threshold, counters)
    assert result.verdict == Verdict.PASS and result.value == 0.65 and result.count == 200
    counters.accepted_tokens = 110
    assert evaluate_acceptance("chat", threshold, counters).verdict == Verdict.FAIL
    none = evaluate_acceptance("chat", threshold, Counters(ok=10))
    assert none.verdict == Verdict.INCONCLUSIVE and "timings.draft_n" in none.note
    # vLLM: no reply's own counts, the engine's over the window stand in
    engine = evaluate_acceptance("chat", threshold, Counters(ok=10), (300.0, 1000.0))
    assert engine.verdict == Verdict.FAIL and engine.value == 0.3 and engine.count == 1000
    assert "engine's counters" in engine.note
    replies_first = evaluate_acceptance("chat", threshold, counters, (300.0, 1000.0))
    assert replies_first.value == 0.55 and not replies_first.note


def vllm_scrapes(*counts: tuple[float, float, float]) -> list[dict]:
    """The engine's scrapes, 5 s apart, with vLLM's speculative counters
    (drafts, draft tokens, accepted tokens) under their canonical names."""
    names = ("spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_tokens_total")
    return [
        {
            "t_s": 5.0 * i,
            "source": "engine",
            "engine": "vllm",
            "series": dict(zip(names, c, strict=True)),
        }
        for i, c in enumerate(counts)
    ]


def test_an_acceptance_slo_reads_the_engines_counters_when_no_reply_gives_them():
    slo = [{"metric": "spec_acceptance_rate", "stat": "rate", "limit": 0.5, "kind": "min"}]
    scrapes = vllm_scrapes((0, 0, 0), (100, 300, 120), (300, 900, 400))
    run = run_of({"chat": bucket({"e2e": [100.0] * 50})}, {"chat": slo})
    run.server_metrics = scrapes
    (result,) = evaluate_run(run).results
    assert result.verdict == Verdict.FAIL and result.value == pytest.approx(400 / 900)
    assert result.count == 900 and "engine's counters" in result.note
    # two scenarios share the engine's counts: neither can claim them
    two = run_of(
        {name: bucket({"e2e": [100.0] * 50}) for name in ("chat", "code")},
        {"chat": slo, "code": slo},
    )
    two.server_metrics = scrapes
    assert {r.verdict for r in evaluate_run(two).results} == {Verdict.INCONCLUSIVE}
