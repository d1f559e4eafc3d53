"""``--abort-on-fail``: when a run may stop because its answer is already known.

A gate that keeps loading a server after an SLO has failed for good spends GPU
time on nothing. "For good" is the point: a failure is settled only when more
samples cannot turn it into a pass, that is when the SLO's whole 95% confidence
interval lies beyond its limit (a ``max`` SLO fails at the interval's lower
bound, a ``min`` one at its upper bound), or when a maximum already exceeds
its limit (a maximum only grows). A failing point estimate whose interval
still reaches the limit is not settled, and neither is a statistic without an
interval (a mean, a throughput). A pass is never settled: the rest of the run
can still fail it, so a passing run always runs to the end.

The judge is the live one (:func:`slogate.analysis.verdict.judge.judge_live`), so an
SLO that the load generator's own error can explain is INVALID there, not
FAIL, and never stops a run. Nothing is checked before ``min_window_s`` of
measured time (after warm-up): the first seconds of a run are its least
typical (k6 calls this ``delayAbortEval``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slogate.analysis.verdict.slo import SloResult, Verdict, point_verdict


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """Why and when a run stopped before its load profile ended."""

    at_s: float
    measured_s: float
    slo: str
    scenario: str
    reason: str


def settled_failure(result: SloResult) -> bool:
    """A FAIL that more samples cannot turn into a pass (the module docstring)."""
    if result.verdict is not Verdict.FAIL:
        return False
    threshold = result.threshold
    if threshold.stat == "max" and threshold.kind == "max":
        return True
    favourable = result.lower if threshold.kind == "max" else result.upper
    return favourable is not None and point_verdict(threshold, favourable) is Verdict.FAIL


def early_stop(
    results: Iterable[SloResult], elapsed_s: float, measured_s: float, min_window_s: float
) -> EarlyStop | None:
    """The first settled failure among ``results`` once ``min_window_s`` of
    measurement has passed, as the reason to stop; None to go on."""
    if measured_s < min_window_s:
        return None
    for result in results:
        if settled_failure(result):
            return EarlyStop(
                at_s=elapsed_s,
                measured_s=measured_s,
                slo=result.name,
                scenario=result.scenario,
                reason=failure_text(result, measured_s),
            )
    return None


def failure_text(result: SloResult, measured_s: float) -> str:
    if result.lower is None and result.upper is None:
        why = "a maximum only grows"
    else:
        ends = ("open" if end is None else f"{end:.6g}" for end in (result.lower, result.upper))
        why = "95% interval {}..{} entirely beyond the limit".format(*ends)
    return (
        f"{result.scenario}: {result.name} failed for good after {measured_s:.0f} s measured: "
        f"{result.value:.6g} on {result.count} samples, {why}"
    )
