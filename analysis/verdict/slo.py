"""SLO verdicts: each threshold against the measured run, then the run as a whole.

A verdict is taken on the point estimate (the percentile, rate or mean as
measured) and carries its margin and 95% confidence interval, so a reader sees
both "did it pass" and "how sure are we". A percentile whose interval is open
because too few samples lie beyond it cannot pass: it is INCONCLUSIVE, with the
number of samples that would be needed. It can still FAIL when the samples at
hand already prove it: the interval's lower bound lies above the limit.

A latency verdict is also not taken on numbers the load generator itself may
have bent (``slogate.analysis.verdict.generator``): when the margin is smaller than the
run's own error bound for that statistic (the same statistic of the load
loop's delays), or when, for a gap-based metric (ITL, chunk gaps, max stall),
the chunks read together while the loop was held are enough to have moved the
statistic across its limit, the SLO is INVALID, with a note that names the
generator and the numbers. Chunks read together while the loop was prompt are
the engine's batching: they stay a finding of the diagnosis, not a reason to
distrust.

The run's verdict is ``invalid`` when its numbers cannot be trusted (the run did
not complete, ``--saturation stop`` ended it past saturation, arrivals were
sent later than their bound (the engine's queue held at the in-flight cap, or
the load generator lagging), the generator ran out of CPU, no request was measured,
or an SLO was invalid as above); otherwise the worst
scenario verdict wins, fail before inconclusive before pass. Exit codes follow
docs/design.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.engine_side.speculation import engine_speculation
from slogate.analysis.measurement.histograms import recorded
from slogate.analysis.measurement.percentiles import CONFIDENCE, estimate, min_samples
from slogate.analysis.measurement.recorder import ANSWER_TWINS, Bucket, Counters
from slogate.analysis.verdict.exitcodes import (  # the contract, re-exported where commands read it
    EXIT_CONFIG as EXIT_CONFIG,
)
from slogate.analysis.verdict.exitcodes import (
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_INVALID,
    EXIT_PASS,
)
from slogate.analysis.verdict.generator import (
    ProcessHealth,
    error_bound_ms,
    generator_reason,
    merged,
    processes,
)
from slogate.analysis.verdict.lag_causes import cause_p99_ms, in_flight_caps, lag_reason
from slogate.scenarios.metrics import (
    ACCEPTANCE,
    BY_KEY,
    ERROR_RATE,
    GAP,
    GENERATOR_LAG,
    GOODPUT,
    LATENCY,
    MS,
    SCHEMA_VALIDITY,
    THROUGHPUT_SLOS,
    names_of,
)
from slogate.scenarios.model import Threshold

US_PER_MS = 1000.0
# Metrics made of gaps between chunks: a read that takes two chunks bends them.
GAP_METRICS = names_of(GAP)
# Chunks read together over this share of the gaps blur ITL's p99 (diagnosis).
SAME_READ_SHARE = 0.01
RATE_METRICS = (ERROR_RATE, GOODPUT, SCHEMA_VALIDITY)
# judged as fractions 0..1, shown in percent
FRACTION_METRICS = (*RATE_METRICS, ACCEPTANCE)
THROUGHPUT_METRICS = THROUGHPUT_SLOS


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    INVALID = "invalid"


EXIT_CODES = {
    Verdict.PASS: EXIT_PASS,
    Verdict.FAIL: EXIT_FAIL,
    Verdict.INVALID: EXIT_INVALID,
    Verdict.INCONCLUSIVE: EXIT_INCONCLUSIVE,
}
_SEVERITY = (Verdict.PASS, Verdict.INCONCLUSIVE, Verdict.FAIL, Verdict.INVALID)


def worst_of(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict: invalid > fail > inconclusive > pass (pass when empty)."""
    return max(verdicts, key=_SEVERITY.index, default=Verdict.PASS)


@dataclass(frozen=True, slots=True)
class SloResult:
    """One threshold's verdict. ``value`` and the bounds are in the metric's unit
    (ms, a fraction, per second); ``margin`` is the headroom in that unit
    (negative when failing) and ``margin_pct`` the same relative to the limit.
    ``generator_error_ms`` is how far the load generator's own delays can have
    moved a latency value in this run (None when not measured)."""

    scenario: str
    threshold: Threshold
    verdict: Verdict
    value: float | None
    lower: float | None
    upper: float | None
    count: int
    needed: int | None = None
    note: str = ""
    generator_error_ms: float | None = None

    @property
    def margin(self) -> float | None:
        if self.value is None:
            return None
        if self.threshold.kind == "max":
            return self.threshold.limit - self.value
        return self.value - self.threshold.limit

    @property
    def margin_pct(self) -> float | None:
        margin = self.margin
        if margin is None or self.threshold.limit == 0:
            return None
        return 100.0 * margin / abs(self.threshold.limit)

    @property
    def name(self) -> str:
        t = self.threshold
        return f"{t.metric} {t.stat} {'<=' if t.kind == 'max' else '>='} {t.limit:g}"


def percentile_of_stat(stat: str) -> float | None:
    """``p99`` -> 99.0, ``p999`` -> 99.9, ``p99.5`` -> 99.5, ``p50`` -> 50.0;
    None for a stat that is not a percentile (max, mean, ...)."""
    match = re.fullmatch(r"p(\d+(?:\.\d+)?)", stat)
    if match is None:
        return None
    digits = match.group(1)
    if "." in digits or len(digits) <= 2:
        value = float(digits)
    elif digits.startswith("99"):
        value = float(f"99.{digits[2:]}")
    else:
        raise ValueError(f"percentile {stat!r}: write p50..p99, p999, p9999 or p99.5")
    if not 0.0 < value < 100.0:
        raise ValueError(f"percentile {stat!r} must lie strictly between 0 and 100")
    return value


def is_latency_percentile(metric: str, stat: str) -> bool:
    """An SLO on a latency percentile (``ttft_ms p99``): what a latency curve can
    be drawn and its knee found for; not a count, a rate or a mean."""
    return metric.endswith("_ms") and percentile_of_stat(stat) is not None


def proportion_interval(
    hits: int, n: int, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """Clopper-Pearson interval of a proportion: exact, never narrower than it should be."""
    if n == 0:
        return None, None
    alpha = 1.0 - confidence
    from scipy.special import betaincinv  # the Beta quantile, without scipy.stats' 60 MB

    lower = 0.0 if hits == 0 else float(betaincinv(hits, n - hits + 1, alpha / 2))
    upper = 1.0 if hits == n else float(betaincinv(hits + 1, n - hits, 1 - alpha / 2))
    return lower, upper


def point_verdict(threshold: Threshold, value: float) -> Verdict:
    passed = value <= threshold.limit if threshold.kind == "max" else value >= threshold.limit
    return Verdict.PASS if passed else Verdict.FAIL


def evaluate_latency(
    scenario: str, threshold: Threshold, bucket: Bucket, unit: float = US_PER_MS
) -> SloResult:
    """A threshold on a histogram's percentile, max or mean: a latency
    (``<name>_ms``, kept in microseconds) or a per-request token count
    (``unit`` 1, kept as is)."""
    name = threshold.metric.removesuffix("_ms")
    histograms = bucket.histograms
    if name not in histograms and bucket.counters.reasoning_requests == 0:
        name = ANSWER_TWINS.get(name, name)  # nothing reasoned: the answer is the output
    percentile = percentile_of_stat(threshold.stat)
    if percentile is None and threshold.stat not in ("max", "mean"):
        raise ValueError(
            f"scenario {scenario!r}: {threshold.metric} stat {threshold.stat!r}: "
            "expected p50..p999, max or mean"
        )
    n = histograms.histogram(name).get_total_count() if name in histograms else 0
    if n == 0:
        needed = min_samples(percentile / 100.0) if percentile is not None else 1
        note = f"no {name} samples; needs at least {needed}"
        return SloResult(
            scenario, threshold, Verdict.INCONCLUSIVE, None, None, None, 0, needed, note
        )
    histogram = histograms.histogram(name)
    if percentile is None:
        raw = histogram.get_max_value() if threshold.stat == "max" else recorded(histogram).mean()
        value = raw / unit
        return SloResult(scenario, threshold, point_verdict(threshold, value), value, None, None, n)
    est = estimate(histogram, percentile)
    value = est.value / unit
    lower = None if est.lower is None else est.lower / unit
    upper = None if est.upper is None else est.upper / unit
    verdict = point_verdict(threshold, value)
    if est.bounded:
        return SloResult(scenario, threshold, verdict, value, lower, upper, n)
    needed = min_samples(percentile / 100.0)
    proven_fail = threshold.kind == "max" and lower is not None and lower > threshold.limit
    if proven_fail:
        note = f"fails even at the lower confidence bound; {needed} samples bound it fully"
        return SloResult(scenario, threshold, Verdict.FAIL, value, lower, upper, n, needed, note)
    note = f"{n} samples cannot bound {threshold.stat}; needs at least {needed}"
    return SloResult(
        scenario, threshold, Verdict.INCONCLUSIVE, value, lower, upper, n, needed, note
    )


def evaluate_proportion(scenario: str, threshold: Threshold, counters: Counters) -> SloResult:
    """Error rate (failed / all), goodput fraction (good / all, errors are
    misses) or schema validity (answers that met their schema / constrained
    successful requests)."""
    n, hits = {
        "error_rate": (counters.total, counters.failed),
        "goodput": (counters.total, counters.good),
        "schema_validity": (counters.constrained, counters.constrained - counters.schema_invalid),
    }[threshold.metric]
    if n == 0:
        return SloResult(
            scenario, threshold, Verdict.INCONCLUSIVE, None, None, None, 0, 1, "no requests"
        )
    value = hits / n
    lower, upper = proportion_interval(hits, n)
    return SloResult(scenario, threshold, point_verdict(threshold, value), value, lower, upper, n)


def evaluate_throughput(
    scenario: str, threshold: Threshold, counters: Counters, measured_s: float | None
) -> SloResult:
    """Successful requests, or output or input tokens, per second of the measured window."""
    if not measured_s or measured_s <= 0:
        note = "the measured window's length is unknown"
        return SloResult(
            scenario, threshold, Verdict.INCONCLUSIVE, None, None, None, counters.total, None, note
        )
    amount = {
        "requests_per_s": counters.ok,
        "output_tokens_per_s": counters.output_tokens,
        "input_tokens_per_s": counters.input_tokens,
    }[threshold.metric]
    value = amount / measured_s
    return SloResult(
        scenario, threshold, point_verdict(threshold, value), value, None, None, counters.total
    )


def evaluate_acceptance(
    scenario: str,
    threshold: Threshold,
    counters: Counters,
    engine: tuple[float, float] | None = None,
) -> SloResult:
    """Speculative acceptance: the draft tokens accepted over those verified,
    as the replies reported them (llama.cpp's ``timings``), else as the
    engine counted them over the measured window (``engine``: accepted and
    drafted, given only when the run has one scenario, the engine's counts
    being every request's). The tokens of one request are not independent
    trials, so no interval is claimed; ``count`` is the draft tokens."""
    accepted, drafted, note = float(counters.accepted_tokens), float(counters.draft_tokens), ""
    if drafted == 0 and engine is not None and engine[1] > 0:
        accepted, drafted = engine
        note = "from the engine's counters over the measured window: no reply gave its own"
    if drafted == 0:
        note = (
            "no reply said what was drafted for it (llama.cpp's timings.draft_n), and "
            "the engine's counters (vLLM's spec_decode_*) were not read for this scenario "
            "alone: none, or several scenarios share them"
        )
        return SloResult(scenario, threshold, Verdict.INCONCLUSIVE, None, None, None, 0, 1, note)
    value = accepted / drafted
    verdict = point_verdict(threshold, value)
    return SloResult(scenario, threshold, verdict, value, None, None, round(drafted), note=note)


def evaluate(
    scenario: str,
    threshold: Threshold,
    bucket: Bucket,
    measured_s: float | None,
    engine_drafts: tuple[float, float] | None = None,
) -> SloResult:
    metric = threshold.metric
    measured = BY_KEY.get(metric)
    if measured is not None and measured.slo:
        unit = US_PER_MS if measured.unit == MS else 1.0
        return evaluate_latency(scenario, threshold, bucket, unit)
    if metric in RATE_METRICS:
        return evaluate_proportion(scenario, threshold, bucket.counters)
    if metric in THROUGHPUT_METRICS:
        return evaluate_throughput(scenario, threshold, bucket.counters, measured_s)
    if metric == ACCEPTANCE:
        return evaluate_acceptance(scenario, threshold, bucket.counters, engine_drafts)
    raise ValueError(f"scenario {scenario!r}: SLO metric {metric!r} is not one slogate measures")


def thresholds_of(scenario: str, scenario_meta: Mapping[str, Any]) -> list[Threshold]:
    """The scenario's thresholds from run metadata, plus the goodput minimum when
    the goodput block sets one and no explicit goodput threshold exists."""
    thresholds = []
    for index, item in enumerate(scenario_meta.get("slo") or []):
        try:
            thresholds.append(Threshold(**item))
        except TypeError as exc:
            raise ValueError(f"scenario {scenario!r}: slo[{index}] {item!r}: {exc}") from None
    goodput = scenario_meta.get("goodput") or {}
    has_goodput = any(t.metric == "goodput" for t in thresholds)
    if goodput.get("min_fraction") is not None and not has_goodput:
        thresholds.append(Threshold("goodput", "fraction", float(goodput["min_fraction"]), "min"))
    return thresholds


def lag_p99_ms(run: RunData) -> float | None:
    """Generator lag p99 as the load side measured it, else from the lag histograms."""
    reported = (run.meta.get("generator") or {}).get("lag_p99_ms")
    if reported is not None:
        return float(reported)
    worst = None
    for name in run.scenario_names():
        histograms = run.overall(name).histograms
        lag = GENERATOR_LAG.name
        if lag in histograms and histograms.histogram(lag).get_total_count():
            p99 = histograms.histogram(lag).get_value_at_percentile(99.0) / US_PER_MS
            worst = p99 if worst is None else max(worst, p99)
    return worst


def is_latency(threshold: Threshold) -> bool:
    measured = BY_KEY.get(threshold.metric)
    return measured is not None and LATENCY in measured.groups


def generator_bound_ms(threshold: Threshold, health: ProcessHealth | None) -> float | None:
    """How far the load generator's own delays can have moved this latency
    statistic in this run (``slogate.analysis.verdict.generator``); None when unmeasured."""
    if health is None or not is_latency(threshold):
        return None
    return error_bound_ms(health, percentile_of_stat(threshold.stat), threshold.stat)


def stalled_reach_ms(threshold: Threshold, bucket: Bucket) -> tuple[float, float] | None:
    """Where the chunks read together while the loop was stalled can have put a
    gap metric's statistic: a share s of bent samples (a 0 and a doubled gap
    each) moves a percentile p anywhere between the p-s and p+s percentiles of
    the rest, the max anywhere above the 100-s one. None when no such chunk,
    or for the mean (a 0 and a doubled gap keep their sum)."""
    metric = threshold.metric.removesuffix("_ms")
    c = bucket.counters
    if metric not in GAP_METRICS or not c.same_read_stalled_gaps or metric not in bucket.histograms:
        return None
    percentile = 100.0 if threshold.stat == "max" else percentile_of_stat(threshold.stat)
    if percentile is None:
        return None
    share = 100.0 * c.same_read_stalled_gaps / max(c.chunk_gaps, 1)
    view = recorded(bucket.histograms.histogram(metric))
    low = view.value_at_percentile(max(percentile - share, 0.0)) / US_PER_MS
    high = view.value_at_percentile(min(percentile + share, 100.0)) / US_PER_MS
    return low, high


def generator_doubt(result: SloResult, bucket: Bucket) -> str | None:
    """Why the generator may have bent this verdict (naming the numbers), or None."""
    t = result.threshold
    if result.verdict not in (Verdict.PASS, Verdict.FAIL) or result.margin is None:
        return None
    bound = result.generator_error_ms
    if bound is not None and abs(result.margin) < bound:
        return (
            f"margin {result.margin:+.3f} ms is within the load generator's own error "
            f"bound ±{bound:.3f} ms (its loop stalls at {t.stat}); not trusted"
        )
    reach = stalled_reach_ms(t, bucket)
    if reach is not None and reach[0] <= t.limit <= reach[1]:
        c = bucket.counters
        stalled, gaps = c.same_read_stalled_gaps, c.chunk_gaps
        return (
            f"{stalled} of {gaps} chunk gaps ({100 * stalled / max(gaps, 1):.2f}%) were read "
            "together while the load generator's loop was stalled: they can have put "
            f"{t.stat} anywhere from {reach[0]:.3f} to {reach[1]:.3f} ms, across the limit; "
            "not trusted"
        )
    return None


def distrust(
    results: list[SloResult], health: ProcessHealth | None, bucket: Bucket
) -> list[SloResult]:
    """The results, each latency verdict the generator may have bent made INVALID."""
    judged = []
    for result in results:
        result = replace(result, generator_error_ms=generator_bound_ms(result.threshold, health))
        doubt = generator_doubt(result, bucket)
        if doubt is not None:
            note = f"{doubt}; {result.note}" if result.note else doubt
            result = replace(result, verdict=Verdict.INVALID, note=note)
        judged.append(result)
    return judged


def invalid_reasons(run: RunData) -> list[str]:
    """Why the run's numbers cannot be trusted; empty when they can."""
    meta = run.meta
    reasons = []
    if meta.get("complete") is False:
        reasons.append(f"run incomplete: {meta.get('incomplete_reason') or 'no reason given'}")
    saturation = meta.get("saturation") or {}
    if saturation.get("stopped"):
        reasons.append(f"stopped by --saturation stop: {saturation['found']['reason']}")
    generator = meta.get("generator") or {}
    lag, bound = lag_p99_ms(run), generator.get("max_lag_ms")
    if lag is not None and bound is not None and lag > bound:
        reasons.append(lag_reason(lag, bound, cause_p99_ms(run), in_flight_caps(meta)))
    if generator.get("cpu_warning"):
        reasons.append("load generator CPU was saturated (over 90%): timings are unreliable")
    counters = [run.overall(name).counters for name in run.scenario_names()]
    total = sum(c.total for c in counters)
    if total == 0:
        reasons.append("no request was measured")
    elif sum(c.ok for c in counters) == 0:
        reasons.append(
            f"all {total} measured requests failed: the engine is down or rejects the requests"
        )
    return reasons


@dataclass(frozen=True, slots=True)
class RunVerdict:
    verdict: Verdict
    results: tuple[SloResult, ...]
    scenarios: dict[str, Verdict]
    reasons: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def worst(self) -> SloResult | None:
        """The SLO to read first: the deepest failure, else an inconclusive one,
        else the pass with the least headroom."""

        def key(r: SloResult) -> tuple[int, float]:
            margin = r.margin_pct
            return (-_SEVERITY.index(r.verdict), margin if margin is not None else float("inf"))

        return min(self.results, key=key, default=None)


def judge_scenario(
    name: str,
    scenario_meta: Mapping[str, Any],
    bucket: Bucket,
    measured_s: float | None,
    health: ProcessHealth | None,
    engine_drafts: tuple[float, float] | None = None,
) -> tuple[list[SloResult], Verdict]:
    """One scenario's thresholds on its bucket, the generator's doubts applied,
    and the scenario's verdict. The run's verdict and the live view both judge
    through here; ``engine_drafts``: the engine's speculative (accepted,
    drafted) tokens over the window, for a scenario that has it to itself."""
    results = [
        evaluate(name, threshold, bucket, measured_s, engine_drafts)
        for threshold in thresholds_of(name, scenario_meta)
    ]
    results = distrust(results, health, bucket)
    floor = Verdict.INCONCLUSIVE if bucket.counters.total == 0 else Verdict.PASS
    return results, worst_of([floor, *(r.verdict for r in results)])


def engine_drafts(run: RunData) -> tuple[float, float] | None:
    """The engine's speculative (accepted, drafted) tokens over the measured
    window, when it counts them."""
    found = engine_speculation(run)
    return None if found is None else (found["accepted_tokens"], found["draft_tokens"])


def evaluate_run(run: RunData) -> RunVerdict:
    """Every scenario's thresholds on its measured bucket, and the overall verdict.
    A scenario without measured requests is inconclusive: zero requests never pass."""
    measured_s = run.meta.get("measured_s")
    declared = run.meta.get("scenarios") or {}
    per_process = processes(run.meta)
    health = merged(per_process)
    results: list[SloResult] = []
    scenarios: dict[str, Verdict] = {}
    names = run.scenario_names()
    drafts = engine_drafts(run) if len(names) == 1 else None
    for name in names:
        mine, scenarios[name] = judge_scenario(
            name, declared.get(name) or {}, run.overall(name), measured_s, health, drafts
        )
        results.extend(mine)
    distrusted = [
        f"{r.scenario}: {r.name}: {r.note}" for r in results if r.verdict is Verdict.INVALID
    ]
    reasons = invalid_reasons(run)
    if distrusted:
        reasons += distrusted
        # Stalled reads void a verdict on their own: the loop's numbers may be unmeasured.
        loop = generator_reason(per_process)
        if loop is not None:
            reasons.append(loop)
    verdict = Verdict.INVALID if reasons else worst_of(scenarios.values())
    return RunVerdict(verdict, tuple(results), scenarios, tuple(reasons))
