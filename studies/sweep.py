"""Sweeps: a scenario at rising load, and the highest load its SLOs allow.

Given load levels (open-loop rates or closed-loop user counts) a sweep runs one
trial per level; searching instead, it grows the load until an SLO fails,
bisects between the last pass and the first fail and confirms the result with a
longer run, as MLPerf's server scenario does (:class:`MaxSearch` keeps the
books). A trial too short to bound a percentile is rerun once, longer. The
document (sweep.json) names the max load, the SLO that limits it, the knee of
the latency curve and what the max costs per million tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from slogate.analysis.documents.contracts import SloEntry, Sweep, WorstSlo, parse
from slogate.analysis.documents.versions import SWEEP_SCHEMA
from slogate.analysis.measurement.costs import Pricing, throughput_cost
from slogate.analysis.verdict.slo import is_latency_percentile
from slogate.scenarios import Scenario
from slogate.scenarios.metrics import TTFT
from slogate.studies.max_load import MaxSearch, knee_index, limiting_slo
from slogate.studies.points import lookup
from slogate.studies.tiers import Tier, tiers_block
from slogate.studies.trials import TrialResult, point_of

Mode = Literal["rate", "users"]
UNITS: dict[Mode, str] = {"rate": "requests/s", "users": "users"}
SESSIONS = "concurrent sessions"  # the users of a replayed agent tree scenario
DEFAULT_KNEE = {"metric": TTFT.key, "stat": "p99"}
KNEE_STATS = ("p50", "p90", "p95", "p99", "p999")
EXTEND_MARGIN = 1.25
LONGEST_TRIAL_FACTOR = 10
CONFIRM_FACTOR = 2


@dataclass(frozen=True)
class SweepSettings:
    """What a sweep was asked to do. ``levels`` are the loads to run, empty when
    searching (``find_max``); durations are seconds; ``command`` is the command
    line as the document records it."""

    scenario: str
    mode: Mode
    duration: float
    levels: tuple[float, ...] = ()
    find_max: bool = False
    start: float | None = None
    ceiling: float | None = None
    tolerance: float = 0.1
    confirm_duration: float | None = None
    max_trials: int = 16
    max_duration: float | None = None
    seed: int | None = None
    command: str = ""
    keep_climbing: bool = False
    sessions: bool = False  # closed-loop users are agent sessions
    tiers: tuple[Tier, ...] = ()

    @property
    def unit(self) -> str:
        return SESSIONS if self.sessions and self.mode == "users" else UNITS[self.mode]

    @property
    def longest_trial(self) -> float:
        """How long a rerun may last: --max-duration, else ten trials' worth."""
        return self.max_duration or LONGEST_TRIAL_FACTOR * self.duration

    @property
    def confirm_seconds(self) -> float:
        return self.confirm_duration or CONFIRM_FACTOR * self.duration

    def search(self) -> MaxSearch:
        """The books of the sweep: searching, they also choose the next load."""
        return MaxSearch(
            start=self.start or (self.levels[0] if self.levels else 1.0),
            integer=self.mode == "users",
            tolerance=self.tolerance,
            ceiling=self.ceiling,
        )


@dataclass(frozen=True)
class TrialSpec:
    """One trial to run: its place in the sweep, its folder name under runs/,
    its load and whether it confirms the search's result."""

    index: int
    name: str
    value: float
    duration: float
    confirmation: bool
    load: dict[str, Any]


TrialRunner = Callable[[TrialSpec], TrialResult]


def has_slo(scenario: Scenario) -> bool:
    goodput = scenario.slo.goodput
    return bool(scenario.slo.thresholds) or (
        goodput is not None and goodput.min_fraction is not None
    )


def require_slo(path: Path, declared: Sequence[Scenario]) -> None:
    """A search needs an SLO to fail: without one, no load is too much."""
    if not any(has_slo(s) for s in declared):
        raise ValueError(f"{path}: declares no SLO, so no load is too much for it")


def load_levels(text: str, integer: bool) -> list[float]:
    """``1,2,4`` as sorted distinct positive loads (whole numbers for users)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{text!r}: expected comma-separated numbers") from None
    if not values or min(values) <= 0 or (integer and any(v != int(v) for v in values)):
        kind = "whole numbers of users" if integer else "rates"
        raise ValueError(f"{text!r}: expected positive {kind}")
    return sorted(set(values))


def trial_load(mode: Mode, value: float, duration: float, seed: int | None) -> dict[str, Any]:
    """The `slogate run` settings of a trial at ``value``. Users are whole and
    all start at once: the scenario's own ramp (4 a second, say) would still be
    climbing when a short trial ends, judging it at a load it never offered (a
    tune's 6 s trial of 128 users had reached 24)."""
    if mode == "rate":
        return {"rate": value, "duration": duration, "seed": seed}
    users = int(value)
    return {"users": users, "spawn_rate": users, "duration": duration, "seed": seed}


def longer_duration(result: TrialResult, duration: float, max_duration: float) -> float | None:
    """How long a rerun must last for every percentile that lacked samples to be
    bounded (with a margin, in whole seconds), capped at ``max_duration``; None when the trial was
    not short of samples or cannot be lengthened."""
    if result.verdict != "inconclusive" or duration >= max_duration:
        return None
    ratios = [
        s.needed / max(s.n, 1) for s in slo_list(result) if s.verdict == "inconclusive" and s.needed
    ]
    if not ratios:
        return None
    return min(max_duration, math.ceil(duration * max(ratios) * EXTEND_MARGIN))


class SweepTrials:
    """The sweep's trials by load level, run through ``runner``."""

    def __init__(self, settings: SweepSettings, runner: TrialRunner) -> None:
        self.settings, self.runner = settings, runner
        self.by_value: dict[float, list[TrialResult]] = {}
        self.order: list[tuple[float, bool, TrialResult]] = []  # every run
        self.judged: list[tuple[float, TrialResult]] = []  # the runs whose verdict counted

    def run(self, value: float, duration: float, confirmation: bool = False) -> TrialResult:
        index = len(self.order) + 1
        mode = self.settings.mode
        name = f"{index:02d}-{mode}-{value:g}" + ("-confirm" if confirmation else "")
        load = trial_load(mode, value, duration, self.settings.seed)
        result = self.runner(TrialSpec(index, name, value, duration, confirmation, load))
        self.by_value.setdefault(value, []).append(result)
        self.order.append((value, confirmation, result))
        return result

    def judge(self, value: float, duration: float, confirmation: bool = False) -> TrialResult:
        """A trial whose verdict counts: rerun once, longer, when it was too short."""
        result = self.run(value, duration, confirmation)
        longer = longer_duration(result, duration, self.settings.longest_trial)
        if longer is not None:
            result = self.run(value, longer, confirmation)
        self.judged.append((value, result))
        return result


def find_max(trials: SweepTrials, search: MaxSearch) -> None:
    """Trials chosen by the search until it is over (or --max-trials ran)."""
    settings = trials.settings
    for _ in range(settings.max_trials):
        step = search.next()
        if step is None:
            break
        duration = settings.confirm_seconds if step.confirmation else settings.duration
        result = trials.judge(step.value, duration, step.confirmation)
        search.record(step.value, result.passed, step.confirmation)


def run_levels(trials: SweepTrials, search: MaxSearch) -> tuple[float, ...]:
    """Every level once, lowest first, until one fails, is invalid or is past
    saturation: a higher load would only spend GPU time to fail again (unless
    ``keep_climbing``). The search object only keeps the books (highest pass,
    lowest fail), it chooses nothing. Returns the levels left unrun."""
    levels = trials.settings.levels
    for i, value in enumerate(levels):
        result = trials.judge(value, trials.settings.duration)
        search.record(value, result.passed)
        if result.beyond_limit and not trials.settings.keep_climbing:
            return levels[i + 1 :]
    return ()


@dataclass(frozen=True)
class SweepRun:
    """A sweep's trials and books once it stopped; ``finished`` is False when a
    search ran out of trials before it ended."""

    trials: SweepTrials
    search: MaxSearch
    finished: bool
    skipped: tuple[float, ...] = ()


def run_sweep(settings: SweepSettings, search: MaxSearch, runner: TrialRunner) -> SweepRun:
    """Every trial of the sweep, searching or level by level; ``search`` is
    :meth:`SweepSettings.search`, made by the caller so that bad settings are
    refused before an engine is started."""
    trials = SweepTrials(settings, runner)
    if settings.find_max:
        find_max(trials, search)
        return SweepRun(trials, search, search.next() is None)
    return SweepRun(trials, search, True, run_levels(trials, search))


def slo_list(result: TrialResult) -> list[WorstSlo]:
    """Every SLO entry of a trial, each with its scenario's name."""
    scenarios = {} if result.summary is None else result.summary.scenarios
    return [
        WorstSlo.model_validate({"scenario": name, **slo.model_dump()})
        for name, block in scenarios.items()
        for slo in block.slo
    ]


def slo_document(slo: WorstSlo) -> dict[str, Any]:
    """An SLO entry as sweep.json holds it: its scenario first, then the entry."""
    return {"scenario": slo.scenario, **slo.model_dump(exclude={"scenario"})}


def limiting_of(result: TrialResult) -> str | None:
    """The SLO that failed a trial, as text with its value; the reason if invalid."""
    if result.summary is None:
        return f"no results (exit code {result.exit_code})"
    if result.verdict == "invalid":
        return "invalid run: " + "; ".join(result.summary.invalid_reasons)
    slo = limiting_slo(slo_list(result))
    if slo is None:
        return None
    value = "n/a" if slo.value is None else f"{slo.value:.4g}"
    return f"{slo.scenario}: {slo.name} (measured {value})"


def knee_of(points: list[dict[str, Any]], metric: str, stat: str) -> dict[str, Any] | None:
    """Where ``metric`` ``stat`` turns from flat to steep along the points' loads."""
    stat = stat if stat in KNEE_STATS else "p99"
    looked_up = [(p["x"], lookup(p, ("metrics", metric, stat))) for p in points]
    known = [(x, y) for x, y in looked_up if y is not None]
    index = knee_index([x for x, _ in known], [y for _, y in known])
    if index is None:
        return None
    x, y = known[index]
    return {"x": x, "y": y, "metric": metric, "stat": stat}


def knee_metric(slos: Sequence[SloEntry], limiting: SloEntry | None) -> dict[str, str]:
    """The curve to find the knee on: the limiting SLO's when it is on a latency
    percentile, else the first latency SLO's, else TTFT p99. ``limiting`` comes
    from a failed trial, so its numbers differ from the entries of ``slos``: it is
    matched by its metric and stat, not as a whole."""
    if limiting is not None and is_latency_percentile(limiting.metric, limiting.stat):
        return {"metric": limiting.metric, "stat": limiting.stat}
    latency = [s for s in slos if is_latency_percentile(s.metric, s.stat)]
    if latency:
        return {"metric": latency[0].metric, "stat": latency[0].stat}
    return DEFAULT_KNEE


def search_block(run: SweepRun, out: Path) -> dict[str, Any]:
    """The search's books and every trial it ran (folders relative to ``out``)."""
    search = run.search
    return {
        "max": search.result,
        "confirmed": search.confirmed,
        "highest_pass": search.highest_pass,
        "lowest_fail": search.lowest_fail,
        "tolerance": search.tolerance,
        "finished": run.finished,
        "trials": [
            {
                "value": value,
                "confirmation": confirmation,
                "passed": result.passed,
                "verdict": result.verdict,
                "dir": str(result.out.relative_to(out)),
                "limiting": limiting_of(result),
            }
            for value, confirmation, result in run.trials.order
        ],
    }


def first_failure(trials: SweepTrials, above: float | None) -> tuple[float, TrialResult] | None:
    """The failed trial at the lowest load above ``above``: what limits the load."""
    failed = [
        (value, r)
        for value, r in trials.judged
        if not r.passed and (above is None or value > above)
    ]
    return min(failed, key=lambda item: item[0]) if failed else None


def findings_text(
    unit: str,
    best: float | None,
    limiter: tuple[float, TrialResult] | None,
    knee: Mapping[str, Any] | None,
) -> tuple[str, list[str]]:
    """The headline and the lines under it: the max, the limiting SLO, the knee."""
    limit_text = None if limiter is None else limiting_of(limiter[1])
    if best is None:
        headline = f"no load level met every SLO{f': {limit_text}' if limit_text else ''}"
    else:
        headline = f"{best:g} {unit} is the highest load meeting every SLO"
    lines = []
    if limiter is not None:
        lines.append(f"limiting SLO, broken at {limiter[0]:g} {unit}: {limit_text}")
    elif best is not None:
        lines.append(f"no SLO broke up to {best:g} {unit}: the sweep did not reach the limit")
    if knee is not None:
        lines.append(
            f"knee of {knee['metric']} {knee['stat']} vs load at {knee['x']:g} {unit} "
            f"({knee['y']:.4g} ms): latency turns steep beyond it"
        )
    else:
        lines.append(
            "no knee found: the loads tried do not show both the flat and the steep part "
            "of the latency curve (map it with --rates or --users)"
        )
    return headline, lines


def build_document(run: SweepRun, out: Path, pricing: Pricing | None) -> dict[str, Any]:
    """sweep.json: the points, the max (confirmed when searched), the limiting SLO,
    the knee and the cost at the max; checked against its contract (:class:`Sweep`)."""
    settings, trials, search = run.trials.settings, run.trials, run.search
    unit = settings.unit
    points = [
        point_of(f"{value:g}", value, results, out, pricing)
        for value, results in sorted(trials.by_value.items())
    ]
    slos = next((slo_list(r) for _, _, r in trials.order if r.summary), [])
    best = search.result if settings.find_max else search.highest_pass
    limiter = first_failure(trials, search.highest_pass)
    limiting = None if limiter is None else limiting_slo(slo_list(limiter[1]))
    knee = knee_of(points, **knee_metric(slos, limiting))
    headline, lines = findings_text(unit, best, limiter, knee)
    tiers = tiers_block(settings.tiers, trials.judged, unit)
    lines += [
        f"tier {t['name']}: "
        + (f"at most {t['max']:g} {unit}" if t["max"] is not None else "no load tried met it")
        for t in tiers
    ]
    if run.skipped:
        lines.append(
            f"not run: {', '.join(f'{v:g}' for v in run.skipped)} {unit}, above a level that "
            "failed, was invalid or went past saturation (--keep-climbing runs them)"
        )
    at_max = next((p for p in points if p["x"] == best), None)
    cost = None
    if at_max is not None:
        cost = throughput_cost(pricing, at_max["throughput"], f"max {unit} under SLO ({best:g})")
    doc = {
        "schema": SWEEP_SCHEMA,
        "mode": settings.mode,
        "unit": unit,
        "scenario": settings.scenario,
        "created_at": datetime.now().isoformat(timespec="seconds"),
        "command": settings.command,
        "slo": [slo_document(s) for s in slos],
        "points": points,
        "max": best,
        "limiting_slo": None if limiting is None else slo_document(limiting),
        "knee": knee,
        "find_max": search_block(run, out) if settings.find_max else None,
        "cost_at_max": cost,
        "headline": headline,
        "findings": lines,
        "skipped_levels": list(run.skipped),
        "tiers": tiers,
    }
    parse(Sweep, doc, str(out / "sweep.json"))  # the writer holds to its own contract
    return doc


def unjudged(run: SweepRun) -> list[TrialResult]:
    """The trials that wrote no results: a sweep with any is invalid."""
    return [result for _, _, result in run.trials.order if result.summary is None]
