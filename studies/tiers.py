"""SLO tiers: the most load a deployment holds under each of several sets of
SLOs (an interactive tier, a batch tier), read off one sweep's trials.

A scenario's ``slo_tiers`` name sets of thresholds beside its gating ``slo``.
Each judged trial is judged again under every tier, on the histograms it
saved (the same evaluation as its own verdict); a tier's maximum is the
highest load below which every judged trial met the tier. The trials are
the ones the sweep chose for its own SLOs, so a tier's answer is as fine as
the loads tried around it; ``--users`` levels map every tier evenly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.verdict.slo import Verdict, evaluate
from slogate.scenarios.model import Threshold
from slogate.studies.trials import TrialResult

Tier = tuple[str, tuple[Threshold, ...]]


def tier_passed(result: TrialResult, thresholds: Sequence[Threshold]) -> bool:
    """Whether a trial met every threshold of a tier (an invalid or failed
    run meets none)."""
    if result.summary is None or result.verdict in ("invalid", "error"):
        return False
    run = RunData.load(result.out)
    measured_s = run.meta.get("measured_s")
    return all(
        evaluate(name, threshold, run.overall(name), measured_s).verdict is Verdict.PASS
        for name in run.scenario_names()
        for threshold in thresholds
    )


def tier_max(judged: Sequence[tuple[float, bool]]) -> float | None:
    """The highest load whose trial passed with every lower one passing too."""
    best = None
    for value, passed in sorted(judged):
        if not passed:
            break
        best = value
    return best


def tiers_block(
    tiers: Sequence[Tier], judged: Sequence[tuple[float, TrialResult]], unit: str
) -> list[dict[str, Any]]:
    """Each tier's thresholds, its verdict at every load tried and its maximum."""
    out = []
    for name, thresholds in tiers:
        verdicts: dict[float, bool] = {}
        for value, result in judged:  # a load tried twice (a confirmation) must pass both
            verdicts[value] = verdicts.get(value, True) and tier_passed(result, thresholds)
        points = sorted(verdicts.items())
        out.append(
            {
                "name": name,
                "slo": [
                    {"metric": t.metric, "stat": t.stat, "threshold": t.limit, "kind": t.kind}
                    for t in thresholds
                ],
                "points": [{"x": value, "passed": passed} for value, passed in points],
                "max": tier_max(points),
                "unit": unit,
            }
        )
    return out
