"""Run against baseline: per-metric, per-percentile deltas and a regression verdict.

Both runs' histograms are saved exactly, so the comparison is exact too. A
change counts only when it is both large (beyond ``tolerance``, relative) and
real (the two 95% confidence intervals do not overlap); a large change whose
intervals overlap or are open is reported as ``uncertain``. So is a latency
change no larger than the two runs' load generators could have made between
them (the sum of their error bounds for that statistic,
``slogate.analysis.verdict.generator``): a regression verdict, like an SLO verdict,
never rests on numbers the generator itself bent. A regression is a
gated percentile (p95, p99 by default) of a latency metric that got worse in
that sense. Throughput and error rate are shown beside it but do not gate.

A latency that rose beyond the tolerance with its intervals apart, but by no
more than the generators' error, is neither: its status is ``cannot-tell``.
The gate cannot say whether the server or the runner moved it, so it does not
pass it silently: the comparison's verdict is "cannot tell" and its exit code
3 (the run cannot be judged) unless the user allowed it (``--allow-uncertain``).

Exit codes of ``slogate compare``: 0 no regression, 1 regression, 2 bad input
(a folder that is not a results folder, or two runs without a scenario in common),
3 a gated latency rose by no more than the generators' error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from slogate.analysis.documents.other_tools import OtherRun
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.percentiles import STANDARD_PERCENTILES, Estimate, estimate
from slogate.analysis.measurement.recorder import Counters
from slogate.analysis.verdict.exitcodes import EXIT_INVALID
from slogate.analysis.verdict.generator import ProcessHealth, error_bound_ms, merged, processes
from slogate.analysis.verdict.slo import proportion_interval
from slogate.scenarios.metrics import names_of

EXIT_NO_REGRESSION = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_CANNOT_TELL = EXIT_INVALID
DEFAULT_TOLERANCE = 0.10
GATED = ("p95", "p99")
LATENCY_METRICS = names_of(gated=True)
US_PER_MS = 1000.0

SAME, WORSE, BETTER, UNCERTAIN, MISSING = "same", "worse", "better", "uncertain", "missing"
CANNOT_TELL = "cannot-tell"


@dataclass(frozen=True, slots=True)
class Delta:
    """One statistic in both runs. Latencies are in ms, rates per second or 0..1."""

    scenario: str
    metric: str
    stat: str
    base: Estimate | None
    new: Estimate | None
    status: str
    gated: bool = False
    generator_error_ms: float | None = None
    base_name: str | None = None  # the baseline's own name for it, when another tool made it

    @property
    def change(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        return self.new.value - self.base.value

    @property
    def change_pct(self) -> float | None:
        change = self.change
        if change is None or self.base is None or self.base.value == 0:
            return None
        return 100.0 * change / self.base.value

    @property
    def regression(self) -> bool:
        return self.gated and self.status == WORSE

    @property
    def cannot_tell(self) -> bool:
        """A gated rise the generators' error can explain: the gate cannot judge it."""
        return self.gated and self.status == CANNOT_TELL

    @property
    def within_generator_error(self) -> bool:
        """A change no larger than the two runs' load generators can have made."""
        change = self.change
        return change is not None and within_error(abs(change), self.generator_error_ms)


def within_error(change: float, error: float | None) -> bool:
    """A change (its size) that the generators' summed error bounds can explain."""
    return error is not None and change <= error


def classify(
    base: Estimate | None,
    new: Estimate | None,
    tolerance: float,
    higher_is_worse: bool = True,
    intervals: bool = True,
    generator_error: float | None = None,
) -> str:
    """same / worse / better / uncertain / cannot-tell / missing, as the module
    docstring defines; ``generator_error`` in the estimates' unit."""
    if base is None or new is None or not base.count or not new.count:
        return MISSING
    if base.value == new.value:
        return SAME
    relative = math.inf if base.value == 0 else abs(new.value - base.value) / abs(base.value)
    if relative <= tolerance:
        return SAME
    worse = (new.value > base.value) == higher_is_worse
    if not intervals:
        return WORSE if worse else BETTER
    high, low = (new, base) if new.value > base.value else (base, new)
    disjoint = high.lower is not None and low.upper is not None and high.lower > low.upper
    if not disjoint:
        return UNCERTAIN
    if within_error(high.value - low.value, generator_error):
        return CANNOT_TELL if worse else UNCERTAIN
    return WORSE if worse else BETTER


def scaled(e: Estimate) -> Estimate:
    def ms(v: float | None) -> float | None:
        return None if v is None else v / US_PER_MS

    return Estimate(value=e.value / US_PER_MS, lower=ms(e.lower), upper=ms(e.upper), count=e.count)


def latency_estimate(run: RunData, scenario: str, metric: str, p: float) -> Estimate | None:
    histograms = run.overall(scenario).histograms
    if metric not in histograms or not histograms.histogram(metric).get_total_count():
        return None
    return scaled(estimate(histograms.histogram(metric), p))


def rate_estimates(counters: Counters, measured_s: float | None) -> dict[str, Estimate | None]:
    """Error rate with its exact binomial interval; throughputs as points."""
    n = counters.total
    lower, upper = proportion_interval(counters.failed, n)
    rates: dict[str, Estimate | None] = {
        "error_rate": Estimate(counters.failed / n, lower, upper, n) if n else None
    }
    for name, amount in (
        ("requests_per_s", counters.ok),
        ("output_tokens_per_s", counters.output_tokens),
    ):
        rates[name] = (
            Estimate(amount / measured_s, None, None, n)
            if measured_s and measured_s > 0 and n
            else None
        )
    return rates


@dataclass(frozen=True, slots=True)
class Comparison:
    base_run: str | None
    new_run: str | None
    tolerance: float
    gated: tuple[str, ...]
    deltas: tuple[Delta, ...]
    only_in_base: tuple[str, ...] = ()
    only_in_new: tuple[str, ...] = ()
    allow_uncertain: bool = False

    @property
    def regressions(self) -> list[Delta]:
        return [d for d in self.deltas if d.regression]

    @property
    def cannot_tell(self) -> list[Delta]:
        return [d for d in self.deltas if d.cannot_tell]

    @property
    def blocked(self) -> bool:
        """No regression, but a gated rise the gate was not allowed to let pass."""
        return not self.regressions and bool(self.cannot_tell) and not self.allow_uncertain

    @property
    def exit_code(self) -> int:
        if self.regressions:
            return EXIT_REGRESSION
        return EXIT_CANNOT_TELL if self.blocked else EXIT_NO_REGRESSION

    @property
    def verdict(self) -> str:
        if self.regressions:
            return "regression"
        return "cannot tell" if self.blocked else "no regression"

    def to_dict(self) -> dict[str, Any]:
        def delta(d: Delta) -> dict[str, Any]:
            return {
                "scenario": d.scenario,
                "metric": d.metric,
                "stat": d.stat,
                "base": None if d.base is None else asdict(d.base),
                "new": None if d.new is None else asdict(d.new),
                "change": d.change,
                "change_pct": d.change_pct,
                "status": d.status,
                "gated": d.gated,
                "regression": d.regression,
                "cannot_tell": d.cannot_tell,
                "generator_error_ms": d.generator_error_ms,
                "base_name": d.base_name,
            }

        return {
            "base_run": self.base_run,
            "new_run": self.new_run,
            "tolerance": self.tolerance,
            "gated": list(self.gated),
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "regressions": len(self.regressions),
            "cannot_tell": len(self.cannot_tell),
            "allow_uncertain": self.allow_uncertain,
            "only_in_base": list(self.only_in_base),
            "only_in_new": list(self.only_in_new),
            "deltas": [delta(d) for d in self.deltas],
        }


def generator_health(run: RunData) -> ProcessHealth | None:
    """The run's load processes' self-measurement, merged (None when unmeasured)."""
    return merged(processes(run.meta))


def generator_error(
    healths: tuple[ProcessHealth | None, ProcessHealth | None], stat: str, p: float
) -> float | None:
    """How far the two runs' load generators can have moved a latency percentile
    apart, in ms: the sum of each run's error bound (a run that did not measure
    its own adds nothing); None when neither measured."""
    return summed_bounds(error_bound_ms(h, p, stat) for h in healths if h is not None)


def summed_bounds(bounds: Iterable[float | None]) -> float | None:
    """The runs' error bounds added up, the unknown ones as nothing; None when none is known."""
    known = [bound for bound in bounds if bound is not None]
    return sum(known) if known else None


def latency_delta(
    scenario: str,
    metric: str,
    stat: str,
    base: Estimate | None,
    new: Estimate | None,
    settings: tuple[float, tuple[str, ...]],
    error: float | None,
    base_name: str | None = None,
) -> Delta:
    """One latency percentile judged; ``settings`` is (tolerance, gated)."""
    tolerance, gated = settings
    status = classify(base, new, tolerance, generator_error=error)
    return Delta(scenario, f"{metric}_ms", stat, base, new, status, stat in gated, error, base_name)


def rate_delta(
    scenario: str,
    name: str,
    base: Estimate | None,
    new: Estimate | None,
    tolerance: float,
    base_name: str | None = None,
) -> Delta:
    """Error rate (judged on its intervals) or a throughput (a point): shown, never gated."""
    is_error = name == "error_rate"
    status = classify(base, new, tolerance, higher_is_worse=is_error, intervals=is_error)
    return Delta(scenario, name, "rate" if is_error else "run", base, new, status,
                 base_name=base_name)  # fmt: skip


def new_rates(run: RunData, scenario: str) -> dict[str, Estimate | None]:
    return rate_estimates(run.overall(scenario).counters, run.meta.get("measured_s"))


def compare_scenario(
    base: RunData, new: RunData, scenario: str, tolerance: float, gated: tuple[str, ...]
) -> list[Delta]:
    deltas = []
    healths = (generator_health(base), generator_health(new))
    for metric in LATENCY_METRICS:
        for stat, p in STANDARD_PERCENTILES.items():
            b = latency_estimate(base, scenario, metric, p)
            n = latency_estimate(new, scenario, metric, p)
            if b is None and n is None:
                continue
            error = generator_error(healths, stat, p)
            deltas.append(latency_delta(scenario, metric, stat, b, n, (tolerance, gated), error))
    base_rates = new_rates(base, scenario)
    for name, n in new_rates(new, scenario).items():
        deltas.append(rate_delta(scenario, name, base_rates[name], n, tolerance))
    return deltas


def checked(tolerance: float, gated: tuple[str, ...]) -> None:
    """ValueError naming a tolerance or gated percentile the comparison cannot use."""
    if not 0.0 <= tolerance < 10.0:
        raise ValueError(f"tolerance {tolerance!r}: expected a fraction such as 0.10")
    unknown = [s for s in gated if s not in STANDARD_PERCENTILES]
    if unknown:
        raise ValueError(
            f"gated percentiles {unknown}: expected some of {list(STANDARD_PERCENTILES)}"
        )


def compare(
    base: RunData,
    new: RunData,
    tolerance: float = DEFAULT_TOLERANCE,
    gated: tuple[str, ...] = GATED,
    allow_uncertain: bool = False,
) -> Comparison:
    """Deltas of every scenario the two runs share; raises ValueError when they
    share none. ``allow_uncertain`` lets a cannot-tell rise pass the gate."""
    checked(tolerance, gated)
    base_names, new_names = base.scenario_names(), new.scenario_names()
    shared = [name for name in new_names if name in base_names]
    if not shared:
        raise ValueError(
            f"no scenario in common: base has {base_names or 'none'}, new has {new_names or 'none'}"
        )
    deltas = [d for name in shared for d in compare_scenario(base, new, name, tolerance, gated)]
    return Comparison(
        base_run=base.meta.get("run_id"),
        new_run=new.meta.get("run_id"),
        tolerance=tolerance,
        gated=tuple(gated),
        deltas=tuple(deltas),
        only_in_base=tuple(n for n in base_names if n not in new_names),
        only_in_new=tuple(n for n in new_names if n not in base_names),
        allow_uncertain=allow_uncertain,
    )


def compare_other(
    base: OtherRun,
    new: RunData,
    tolerance: float = DEFAULT_TOLERANCE,
    gated: tuple[str, ...] = GATED,
    allow_uncertain: bool = False,
) -> Comparison:
    """NEW against another tool's result (vLLM bench serve, GuideLLM): the
    statistics both measured, in every scenario of NEW (the other tool ran one
    workload), each named as that tool names it. Only NEW's generator error is
    known; a baseline value without an interval counts as exact."""
    checked(tolerance, gated)
    names = new.scenario_names()
    if not names:
        raise ValueError("NEW has no scenario to compare")
    health = generator_health(new)
    deltas = []
    for scenario in names:
        for s in base.latencies:
            p, metric = STANDARD_PERCENTILES[s.stat], s.metric.removesuffix("_ms")
            n = latency_estimate(new, scenario, metric, p)
            error = generator_error((None, health), s.stat, p)
            deltas.append(
                latency_delta(
                    scenario,
                    metric,
                    s.stat,
                    s.estimate,
                    n,
                    (tolerance, gated),
                    error,
                    base.label(s),
                )
            )
        rates = new_rates(new, scenario)
        for s in base.rates:
            deltas.append(
                rate_delta(
                    scenario, s.metric, s.estimate, rates[s.metric], tolerance, base.label(s)
                )
            )
    return Comparison(
        base_run=f"{base.tool} {base.path}",
        new_run=new.meta.get("run_id"),
        tolerance=tolerance,
        gated=tuple(gated),
        deltas=tuple(deltas),
        allow_uncertain=allow_uncertain,
    )
