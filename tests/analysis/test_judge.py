"""The one judge as a table: each kind of run, with and without a baseline, and
the exit code the gate must end with (docs/design.md, "Exit codes").

The runs are hand-built (tests/support/reportdata.py): TTFT lognormal around
300 ms, so its p99 is about 960 ms on 20,000 samples: an SLO of 10 s passes (by
more than a load loop held 2 s can blur), 500 ms fails, and 30 samples cannot
decide a p99."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from reportdata import bucket, chat_run, run_of, with_stalls

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG
from slogate.analysis.verdict.judge import LIVE_OK, judge, judge_live, live_status
from slogate.analysis.verdict.slo import (
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_INVALID,
    EXIT_PASS,
    Verdict,
)

MET, MISSED = 10_000.0, 500.0


def ttft_p99(limit: float) -> dict:
    return {"metric": "ttft_ms", "stat": "p99", "limit": limit, "kind": "max"}


def with_slo(run: RunData, limit: float) -> RunData:
    run.meta["scenarios"]["chat"]["slo"] = [ttft_p99(limit)]
    return run


def passing(scale: float = 1.0, seed: int = 2) -> RunData:
    return with_slo(chat_run(scale, seed=seed), MET)


def failing() -> RunData:
    return with_slo(chat_run(1.0, seed=2), MISSED)


def undecided() -> RunData:
    """30 samples: too few for a p99 either way."""
    return run_of({"chat": bucket({"ttft": [100.0] * 30})}, slo={"chat": [ttft_p99(MET)]})


def incomplete() -> RunData:
    run = passing()
    run.meta.update(complete=False, incomplete_reason="engine down")
    return run


def uncertain(allowed: bool = False) -> RunData:
    """20% slower, its load loop held 2 s for a tenth of the time: every rise
    lies within the generators' error, so the gate cannot tell."""
    run = with_stalls(passing(scale=1.2), stall_ms=2000.0, held=1000)
    run.meta["allow_uncertain"] = allowed
    return run


def elsewhere() -> RunData:
    """A baseline that measured another scenario."""
    return run_of({"rag": bucket({"ttft": [100.0] * 1000})})


def baseline() -> RunData:
    return passing(seed=1)


@dataclass(frozen=True)
class Case:
    run: Callable[[], RunData]
    baseline: Callable[[], RunData] | None
    verdict: Verdict
    comparison: str | None  # the comparison's verdict; None: none was made
    exit_code: int


CASES = {
    "pass": Case(passing, None, Verdict.PASS, None, EXIT_PASS),
    "fail": Case(failing, None, Verdict.FAIL, None, EXIT_FAIL),
    "inconclusive": Case(undecided, None, Verdict.INCONCLUSIVE, None, EXIT_INCONCLUSIVE),
    "invalid": Case(incomplete, None, Verdict.INVALID, None, EXIT_INVALID),
    "pass, as fast as the baseline": Case(passing, baseline, Verdict.PASS, "no regression", 0),
    "pass, faster than the baseline": Case(
        lambda: passing(scale=0.8), baseline, Verdict.PASS, "no regression", EXIT_PASS
    ),
    "pass, yet 20% slower than the baseline": Case(
        lambda: passing(scale=1.2), baseline, Verdict.PASS, "regression", EXIT_FAIL
    ),
    "pass, slower by less than the generators' error": Case(
        uncertain, baseline, Verdict.PASS, "cannot tell", EXIT_INVALID
    ),
    "pass, slower within the error, --allow-uncertain": Case(
        lambda: uncertain(allowed=True), baseline, Verdict.PASS, "no regression", EXIT_PASS
    ),
    "fail and slower: the SLO decides": Case(
        lambda: with_slo(chat_run(1.2, seed=2), MISSED), baseline, Verdict.FAIL, "regression", 1
    ),
    "fail, as fast as the baseline": Case(failing, baseline, Verdict.FAIL, "no regression", 1),
    "inconclusive beside a baseline": Case(
        undecided, baseline, Verdict.INCONCLUSIVE, "no regression", EXIT_INCONCLUSIVE
    ),
    "invalid, even as fast as the baseline": Case(
        incomplete, baseline, Verdict.INVALID, "no regression", EXIT_INVALID
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_judge_ends_each_kind_of_run_with_its_exit_code(case: Case) -> None:
    judgement = judge(case.run(), case.baseline() if case.baseline else None)
    assert judgement.verdict.verdict is case.verdict
    made = judgement.comparison.verdict if judgement.comparison is not None else None
    assert made == case.comparison
    assert judgement.baseline_error is None
    assert judgement.exit_code == case.exit_code
    assert judgement.exit_code != EXIT_CONFIG  # a judged run never blames its configuration


def test_a_baseline_that_shares_no_scenario_is_kept_as_an_error_not_a_failure() -> None:
    judgement = judge(passing(), elsewhere())
    assert judgement.comparison is None
    assert judgement.baseline_error is not None
    assert "no scenario in common" in judgement.baseline_error
    assert "rag" in judgement.baseline_error and "chat" in judgement.baseline_error
    assert judgement.exit_code == EXIT_PASS
    assert judge(failing(), elsewhere()).exit_code == EXIT_FAIL


def test_a_baseline_that_could_not_be_read_is_passed_through() -> None:
    judgement = judge(passing(), None, baseline_error="baseline.json: not a summary")
    assert judgement.comparison is None
    assert judgement.baseline_error == "baseline.json: not a summary"
    assert judgement.exit_code == EXIT_PASS


def test_the_tolerance_decides_what_slower_means() -> None:
    slower = passing(scale=1.2)
    assert judge(slower, baseline()).exit_code == EXIT_FAIL
    assert judge(slower, baseline(), tolerance=0.5).exit_code == EXIT_PASS


def test_the_live_judge_uses_the_final_rules_on_the_numbers_so_far() -> None:
    run = failing()
    meta, final = run.meta["scenarios"]["chat"], judge(run).verdict
    results, verdict = judge_live("chat", meta, run.overall("chat"), 60.0, None)
    assert verdict is final.scenarios["chat"] is Verdict.FAIL
    assert [(r.name, r.verdict) for r in results] == [(r.name, r.verdict) for r in final.results]
    nothing, verdict = judge_live("chat", meta, None, None, None)
    assert verdict is Verdict.INCONCLUSIVE
    assert all(r.verdict is Verdict.INCONCLUSIVE for r in nothing)


@pytest.mark.parametrize(
    ("verdicts", "status"),
    [
        ((Verdict.PASS, Verdict.PASS), LIVE_OK),
        ((Verdict.PASS, Verdict.INCONCLUSIVE), "inconclusive: ttft_ms p99 <= 600"),
        ((Verdict.INCONCLUSIVE, Verdict.INVALID), "invalid: ttft_ms p99 <= 600"),
        ((Verdict.FAIL, Verdict.FAIL), "fail: ttft_ms p99 <= 500, ttft_ms p99 <= 600"),
        ((Verdict.FAIL, Verdict.INVALID), "fail: ttft_ms p99 <= 500"),
    ],
)
def test_the_live_cell_names_the_worst_slos_so_far(
    verdicts: tuple[Verdict, Verdict], status: str
) -> None:
    meta = {"slo": [ttft_p99(500.0), ttft_p99(600.0)]}
    results, _ = judge_live("chat", meta, None, None, None)
    assert live_status([replace(r, verdict=v) for r, v in zip(results, verdicts, strict=True)]) == (
        status
    )
    assert live_status([]) == LIVE_OK
