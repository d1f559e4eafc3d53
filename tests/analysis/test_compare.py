"""Run against baseline: planted regressions are flagged, noise and small changes are not."""

from __future__ import annotations

import json

import pytest
from reportdata import bucket, chat_run, lognormal_ms, run_of, with_stalls

from slogate.analysis.verdict.compare import (
    BETTER,
    CANNOT_TELL,
    EXIT_CANNOT_TELL,
    EXIT_NO_REGRESSION,
    EXIT_REGRESSION,
    GATED,
    MISSING,
    UNCERTAIN,
    WORSE,
    compare,
)
from slogate.reports import comparison_text


def p99(comparison, metric: str = "ttft_ms"):
    return next(d for d in comparison.deltas if d.metric == metric and d.stat == "p99")


def test_a_planted_20_percent_p99_regression_is_flagged() -> None:
    result = compare(chat_run(1.0, seed=1), chat_run(1.2, seed=2))
    delta = p99(result)
    assert delta.status == WORSE
    assert delta.regression
    assert delta.change_pct == pytest.approx(20.0, abs=5.0)
    assert result.exit_code == EXIT_REGRESSION
    assert {d.metric for d in result.regressions} == {"ttft_ms", "itl_ms", "e2e_ms"}


def test_a_2_percent_change_is_ignored() -> None:
    result = compare(chat_run(1.0, seed=1), chat_run(1.02, seed=2))
    assert not result.regressions
    assert result.exit_code == EXIT_NO_REGRESSION
    assert result.verdict == "no regression"


def test_a_large_change_on_too_few_samples_is_uncertain_not_a_regression() -> None:
    result = compare(chat_run(1.0, seed=1, n=100), chat_run(1.3, seed=2, n=100))
    assert p99(result).status == UNCERTAIN
    assert not p99(result).regression


def test_faster_is_better_and_not_a_regression() -> None:
    result = compare(chat_run(1.0, seed=1), chat_run(0.7, seed=2))
    assert p99(result).status == BETTER
    assert result.exit_code == EXIT_NO_REGRESSION


def test_tolerance_is_configurable() -> None:
    base, new = chat_run(1.0, seed=1), chat_run(1.2, seed=2)
    assert not compare(base, new, tolerance=0.5).regressions


def test_throughput_is_reported_but_does_not_gate() -> None:
    result = compare(chat_run(1.0, seed=1), chat_run(1.0, seed=1, ok=10000))
    throughput = next(d for d in result.deltas if d.metric == "requests_per_s")
    assert throughput.status == WORSE
    assert not throughput.regression
    assert result.exit_code == EXIT_NO_REGRESSION


def test_metrics_missing_on_one_side() -> None:
    base = chat_run(1.0, seed=1)
    new = run_of({"chat": bucket({"ttft": lognormal_ms(300, 0.5, 1000, 3)})})
    statuses = {d.status for d in compare(base, new).deltas if d.metric == "itl_ms"}
    assert statuses == {MISSING}


def test_runs_without_a_common_scenario_and_bad_options_are_rejected() -> None:
    other = run_of({"rag": bucket({"ttft": [1.0]})})
    with pytest.raises(ValueError, match="no scenario in common"):
        compare(chat_run(1.0, seed=1, n=100), other)
    with pytest.raises(ValueError, match="tolerance"):
        compare(other, other, tolerance=-0.1)
    with pytest.raises(ValueError, match="p98"):
        compare(other, other, gated=("p98",))


def test_the_comparison_serializes_to_strict_json() -> None:
    result = compare(chat_run(1.0, seed=1, n=500), chat_run(1.2, seed=2, n=500))
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["verdict"] in ("regression", "no regression")
    assert data["exit_code"] == result.exit_code
    assert len(data["deltas"]) == len(result.deltas)


def test_a_rise_the_generators_can_have_made_cannot_be_told_and_is_not_a_regression() -> None:
    """ITL p99 (about 50 ms) grows by 10 ms: within the new run's 30 ms bound at p99
    the gate cannot tell; TTFT p99 (about 960 ms) grows by 190 ms: still a regression."""
    base = with_stalls(chat_run(1.0, seed=1), stall_ms=0.5)
    result = compare(base, with_stalls(chat_run(1.2, seed=2), stall_ms=30.0))
    itl, ttft = p99(result, "itl_ms"), p99(result, "ttft_ms")
    assert itl.generator_error_ms == pytest.approx(30.5, abs=0.1)  # the two runs' bounds
    assert 5.0 < itl.change < itl.generator_error_ms and itl.status == CANNOT_TELL
    assert itl.cannot_tell and not itl.regression
    assert ttft.change > ttft.generator_error_ms and ttft.regression
    # ITL p95 (about 41 ms, +8) lies below the stalls (2% of the time): its bound is 0.2 ms
    regressed = {(d.metric, d.stat) for d in result.regressions}
    assert regressed == {(m, s) for m in ("ttft_ms", "e2e_ms") for s in GATED} | {("itl_ms", "p95")}
    median = next(d for d in result.deltas if d.metric == "itl_ms" and d.stat == "p50")
    assert median.generator_error_ms == pytest.approx(0.2, abs=0.01)  # both runs' p50: 0.1
    assert median.status == WORSE  # +20% of 25 ms, beyond a 0.2 ms bound
    assert "CANNOT-TELL (within the generators' ±30.5" in comparison_text(result, all_rows=True)
    assert result.exit_code == EXIT_REGRESSION  # a regression outranks what cannot be told
    unmeasured = compare(chat_run(1.0, seed=1), chat_run(1.2, seed=2))
    assert p99(unmeasured, "itl_ms").generator_error_ms is None
    assert p99(unmeasured, "itl_ms").regression  # no bound known: judged on the intervals


def test_a_gate_whose_only_rise_is_within_the_generators_error_exits_3_unless_allowed() -> None:
    """Every latency 20% higher, the new run's loop held 2000 ms for 10% of its time:
    the p95s and p99s (E2E p99 about 7600 ms, +1500) rise by less than the bound, so the gate
    cannot tell, and says so; a 20% drop within the bound is merely uncertain."""
    base = chat_run(1.0, seed=1)
    result = compare(base, with_stalls(chat_run(1.2, seed=2), stall_ms=2000.0, held=1000))
    ttft = p99(result)
    assert ttft.status == CANNOT_TELL and ttft.change < ttft.generator_error_ms
    assert not result.regressions and ttft in result.cannot_tell
    assert result.verdict == "cannot tell" and result.exit_code == EXIT_CANNOT_TELL == 3
    text = comparison_text(result)
    assert text.startswith("CANNOT TELL: 0 regression(s), ")
    assert "exit 3 (--allow-uncertain lets them pass)" in text
    data = result.to_dict()
    assert data["cannot_tell"] == len(result.cannot_tell) and data["exit_code"] == 3
    allowed = compare(
        chat_run(1.0, seed=1),
        with_stalls(chat_run(1.2, seed=2), 2000.0, 1000),
        allow_uncertain=True,
    )
    assert allowed.exit_code == EXIT_NO_REGRESSION and allowed.verdict == "no regression"
    assert p99(allowed).status == CANNOT_TELL  # still shown as such
    faster = compare(chat_run(1.2, seed=2), with_stalls(chat_run(1.0, seed=1), 2000.0, 1000))
    assert p99(faster).status == UNCERTAIN and faster.exit_code == EXIT_NO_REGRESSION


def test_with_a_baseline_a_passing_run_that_cannot_be_told_exits_3_unless_allowed(
    tmp_path,
) -> None:
    """The run's own verdict stays pass; the gate's exit code is the comparison's,
    and the run's ``allow_uncertain`` (what --allow-uncertain records) lets it pass."""
    from slogate.reports import write_results

    base, new = (
        chat_run(1.0, seed=1),
        with_stalls(chat_run(1.2, seed=2), stall_ms=2000.0, held=1000),
    )
    gated = write_results(tmp_path / "gated", new, base)
    assert (gated.verdict, gated.exit_code) == ("pass", 3)
    markdown = (tmp_path / "gated" / "summary.md").read_text()
    assert "PASS, CANNOT TELL against the baseline (exit 3)" in markdown
    new.meta["allow_uncertain"] = True
    allowed = write_results(tmp_path / "allowed", new, base)
    assert (allowed.verdict, allowed.exit_code) == ("pass", 0)
    assert allowed.summary["baseline"]["allow_uncertain"] is True
