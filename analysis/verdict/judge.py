"""The one judge: a run (and its baseline) in, the verdict and the exit code out.

Everything that shows a verdict reads it from here: the summary and report, the
exit code, the verdict table a run prints last, and the live view while a run is
going (:func:`judge_live`, the same thresholds on the numbers so far). So the
report, the CI gate and the web UI cannot disagree about an SLO.

The gate's order follows docs/design.md: the SLO verdict decides (pass, fail,
invalid, inconclusive); a run whose SLOs all pass can still fail the gate when
the baseline comparison finds a regression, and exit 3 when a gated latency
rose by no more than the generators' error (unless ``allow_uncertain``). A
baseline that shares no scenario with the run is no reason to fail the run:
the error is kept for the report.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.verdict.compare import DEFAULT_TOLERANCE, Comparison, compare
from slogate.analysis.verdict.generator import ProcessHealth
from slogate.analysis.verdict.slo import (
    RunVerdict,
    SloResult,
    Verdict,
    evaluate_run,
    judge_scenario,
)

LIVE_OK = "ok so far"


@dataclass(frozen=True)
class Judgement:
    """A run's verdict, its baseline comparison when one was made (or why none
    could be), and the exit code that follows from both."""

    verdict: RunVerdict
    comparison: Comparison | None = None
    baseline_error: str | None = None

    @property
    def exit_code(self) -> int:
        code = self.verdict.exit_code
        if code == 0 and self.comparison is not None and self.comparison.exit_code:
            return self.comparison.exit_code  # every SLO met, yet slower or not judgeable
        return code


def judge(
    run: RunData,
    baseline: RunData | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    baseline_error: str | None = None,
) -> Judgement:
    """Evaluate every SLO of ``run`` and compare it with ``baseline`` when given
    (letting a cannot-tell rise pass when the run was told ``--allow-uncertain``)."""
    verdict = evaluate_run(run)
    comparison = None
    if baseline is not None:
        try:
            comparison = compare(
                baseline, run, tolerance, allow_uncertain=bool(run.meta.get("allow_uncertain"))
            )
        except ValueError as exc:
            baseline_error = str(exc)
    return Judgement(verdict, comparison, baseline_error)


def preload_statistics() -> None:
    """Import what the live judge computes with (scipy.special, for the intervals)
    before the load starts: imported on the first live verdict, it would hold a
    single-process run's load loop for about a second mid-run."""
    importlib.import_module("scipy.special")


def judge_live(
    name: str,
    scenario_meta: Mapping[str, Any],
    bucket: Bucket | None,
    measured_s: float | None,
    health: ProcessHealth | None,
) -> tuple[list[SloResult], Verdict]:
    """A scenario's SLOs on the numbers so far, by the rules the final verdict uses."""
    return judge_scenario(name, scenario_meta, bucket or Bucket(), measured_s, health)


def live_status(results: list[SloResult]) -> str:
    """One cell for the live view: the SLOs failing so far by name, else those
    undecided or distrusted, else "ok so far"."""
    for verdict in (Verdict.FAIL, Verdict.INVALID, Verdict.INCONCLUSIVE):
        names = [r.name for r in results if r.verdict is verdict]
        if names:
            return f"{verdict.value}: " + ", ".join(names)
    return LIVE_OK
