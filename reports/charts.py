"""The report's charts, from a run's data: percentile plots, time series, server metrics.

Each function picks what to draw and hands it to :mod:`slogate.reports.svg`. SLO
thresholds are drawn on the charts of their metric, so a reader sees how far
the curve is from the line, not just a verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.verdict.slo import percentile_of_stat
from slogate.reports.curves import nines, nines_ticks, percentile_curve
from slogate.reports.svg import Axis, Cut, Rule, Series, line_chart
from slogate.scenarios.metrics import (
    ACCEPTANCE,
    ANSWER_ITL,
    BY_NAME,
    CHUNK_GAP,
    E2E,
    E2E_SCHED,
    ITL,
    REASONING,
    TPOT,
    TTFA,
    TTFT,
    TTFT_SCHED,
)

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import SloEntry

# each chart: its title and the metrics drawn beside its own, dashed
CURVES = {
    TTFT.name: ("TTFT", (TTFT_SCHED.name,)),
    ITL.name: ("ITL per token", (CHUNK_GAP.name,)),
    TPOT.name: ("TPOT", ()),
    E2E.name: ("E2E", (E2E_SCHED.name,)),
}
# the latencies drawn per time window, and per endpoint and replica
WINDOW_CHARTS = (TTFT.name, ITL.name)
# drawn when requests reasoned: the answer's latencies beside the headline ones
ANSWER_CURVES = {
    TTFA.name: ("TTFA (first answer token) vs TTFT", (TTFT.name, REASONING.name)),
    ANSWER_ITL.name: ("ITL of the answer vs all output", (ITL.name,)),
}


def threshold_rules(slos: Iterable[SloEntry], metric: str, top: float) -> list[Rule]:
    """Lines for the latency SLOs of ``metric``; the point sits at their percentile."""
    rules = []
    for slo in slos:
        if slo.metric != f"{metric}_ms":
            continue
        percentile = percentile_of_stat(slo.stat)
        x = nines(percentile) if percentile is not None else top if slo.stat == "max" else None
        rules.append(Rule(slo.threshold, f"{slo.stat} ≤ {slo.threshold:g} ms", x))
    return rules


def percentile_charts(
    run: RunData, scenario: str, slos: Sequence[SloEntry], baseline: RunData | None
) -> list[Markup]:
    """One HDR-style plot per headline metric: log latency against the nines."""
    charts = []
    histograms = run.overall(scenario).histograms
    base = baseline.overall(scenario).histograms if baseline is not None else None
    curves = dict(CURVES)
    if "reasoning" in histograms:
        curves |= ANSWER_CURVES
    for metric, (title, extras) in curves.items():
        series = [
            Series(BY_NAME[name].label, percentile_curve(histograms.histogram(name)), dashed=i > 0)
            for i, name in enumerate((metric, *extras))
            if name in histograms
        ]
        if base is not None and metric in base:
            curve = percentile_curve(base.histogram(metric))
            series.append(Series(f"baseline {BY_NAME[metric].label}", curve, dashed=True))
        top = max((s.points[-1][0] for s in series if s.points), default=2.0)
        charts.append(
            line_chart(
                series,
                title=f"{title} (ms) by percentile",
                x=Axis(label="percentile (%)", ticks=nines_ticks(top)),
                y=Axis(label="ms", log=True),
                rules=threshold_rules(slos, metric, top),
            )
        )
    return charts


def column(rows: Sequence[Mapping[str, Any]], key: str, per_window: bool = False) -> list:
    """(t_s, value) of one time-series column; ``per_window`` divides by the window."""
    points = []
    for row in rows:
        value = row.get(key)
        if value is not None and per_window:
            value = value / row["window_s"]
        points.append((row["t_s"], value))
    return points


def limit_rules(slos: Iterable[SloEntry], metric: str, scale: float, unit: str) -> list[Rule]:
    """Lines for the SLOs of a rate or a fraction; ``scale`` puts the limit in
    the chart's unit (100 for a percentage)."""
    return [
        Rule(
            slo.threshold * scale,
            f"{'≥' if slo.kind == 'min' else '≤'} {slo.threshold * scale:g}{unit}",
        )
        for slo in slos
        if slo.metric == metric
    ]


# a chart line's points from a series' rows (one per window)
Points = Callable[[Sequence[Mapping[str, Any]]], list[tuple[float, float | None]]]


def metric_rules(slos: Iterable[SloEntry], metric: str) -> list[Rule]:
    """Lines for the latency SLOs of ``metric`` (``ttft``, ``itl``), in ms."""
    return [Rule(r.y, r.label) for r in threshold_rules(slos, metric, 0.0)]


def error_share(rows: Sequence[Mapping[str, Any]]) -> list[tuple[float, float | None]]:
    """Failed requests per window, in percent of the requests that ended in it."""
    points: list[tuple[float, float | None]] = []
    for row in rows:
        failed = row.get("requests_failed", 0)
        ended = row.get("requests_ok", 0) + failed
        points.append((row["t_s"], 100.0 * failed / ended if ended else None))
    return points


def timeseries_charts(
    rows: Sequence[Mapping[str, Any]],
    slos: Sequence[SloEntry],
    cut: Cut | None = None,
    engine_acceptance: Sequence[tuple[float, float | None]] = (),
) -> list[Markup]:
    """Throughput, TTFT, ITL and the error rate per window against their SLOs,
    load, errors; ``cut`` marks where the measured window starts (after warm-up)
    on each. Beside ITL, speculative decoding's acceptance where the replies
    or the engine (``engine_acceptance``: (t_s, rate) between its scrapes)
    said it."""
    if not rows:
        return []
    time = Axis(label="time since start", time=True)
    cuts = () if cut is None else (cut,)
    error_kinds = sorted({kind for row in rows for kind in row.get("errors") or {}})
    error_series = [
        Series(kind, [(r["t_s"], (r.get("errors") or {}).get(kind, 0)) for r in rows])
        for kind in error_kinds
    ]
    gauges = [Series(g, column(rows, g)) for g in ("users", "in_flight") if g in rows[-1]]
    if any(r.get("backlog") for r in rows):  # open loop, arrivals held at the in-flight cap
        gauges.append(Series("held back", column(rows, "backlog")))
    charts = [
        line_chart(
            [
                Series("ok", column(rows, "requests_ok", per_window=True)),
                Series("failed", column(rows, "requests_failed", per_window=True)),
            ],
            title="Requests per second",
            x=time,
            y=Axis(label="req/s"),
            rules=limit_rules(slos, "requests_per_s", 1.0, "/s"),
            cuts=cuts,
        ),
        line_chart(
            [Series("output tokens/s", column(rows, "output_tokens_per_s"))],
            title="Output tokens per second",
            x=time,
            y=Axis(label="tok/s"),
            rules=limit_rules(slos, "output_tokens_per_s", 1.0, "/s"),
            cuts=cuts,
        ),
    ]
    for metric in WINDOW_CHARTS:
        title = f"{metric.upper()} per window (ms)"
        series = [
            Series(f"p50 {metric}", column(rows, f"{metric}_p50_ms")),
            Series(f"p99 {metric}", column(rows, f"{metric}_p99_ms")),
        ]
        rules = metric_rules(slos, metric)
        charts.append(
            line_chart(series, title=title, x=time, y=Axis(label="ms"), rules=rules, cuts=cuts)
        )
    replies = column(rows, "spec_acceptance_rate")
    if engine_acceptance or any(rate is not None for _, rate in replies):
        charts.append(acceptance_chart(replies, engine_acceptance, slos, cuts))
    charts.append(
        line_chart(
            [Series("failed", error_share(rows))],
            title="Error rate per window (%)",
            x=time,
            y=Axis(label="%"),
            rules=limit_rules(slos, "error_rate", 100.0, "%"),
            cuts=cuts,
        )
    )
    charts.append(
        line_chart(
            gauges, title="Users and requests in flight", x=time, y=Axis(label="count"), cuts=cuts
        )
    )
    charts.append(
        line_chart(
            error_series,
            title="Errors per window, by kind",
            x=time,
            y=Axis(label="count"),
            cuts=cuts,
        )
    )
    return charts


def acceptance_chart(
    replies: Sequence[tuple[float, float | None]],
    engine: Sequence[tuple[float, float | None]],
    slos: Sequence[SloEntry],
    cuts: Sequence[Cut],
) -> Markup:
    """Speculative acceptance over time in percent: the replies' own counts
    per window and the engine's between scrapes, against its SLO."""

    def percent(points: Sequence[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
        return [(t, None if rate is None else 100.0 * rate) for t, rate in points]

    series = [
        Series(name, percent(points))
        for name, points in (("replies", replies), ("engine", engine))
        if points
    ]
    return line_chart(
        series,
        title="Speculative acceptance per window (%)",
        x=Axis(label="time since start", time=True),
        y=Axis(label="%"),
        rules=limit_rules(slos, ACCEPTANCE, 100.0, "%"),
        cuts=cuts,
    )


def apart_charts(
    series: Mapping[str, Sequence[Mapping[str, Any]]],
    kind: str,
    slos: Sequence[SloEntry],
    cut: Cut | None = None,
) -> list[Markup]:
    """The time series of a scenario by endpoint (``kind``) or replica, a line
    each: where the load went and which one slowed down, window by window.
    Requests per second, TTFT and ITL p99, and the error rate, each against
    the scenario's SLOs of it: a failing replica shows as well as a slow one."""
    if not series:
        return []
    time = Axis(label="time since start", time=True)
    cuts = () if cut is None else (cut,)

    def of(key: str) -> Points:
        return lambda rows: column(rows, key)

    drawn: tuple[tuple[Points, str, str, list[Rule]], ...] = (
        (of("requests_per_s"), "Requests per second", "req/s", []),
        *(
            (of(f"{m}_p99_ms"), f"{m.upper()} p99 per window (ms)", "ms", metric_rules(slos, m))
            for m in WINDOW_CHARTS
        ),
        (
            error_share,
            "Error rate per window (%)",
            "%",
            limit_rules(slos, "error_rate", 100.0, "%"),
        ),
    )
    return [
        line_chart(
            [Series(name, points(rows)) for name, rows in series.items()],
            title=f"{title}, by {kind}",
            x=time,
            y=Axis(label=unit),
            rules=rules,
            cuts=cuts,
        )
        for points, title, unit, rules in drawn
    ]


def counter_rate(points: Sequence[tuple[float, float]]) -> list[tuple[float, float | None]]:
    """Per-second rate of a monotonic counter; a reset (a drop) leaves a gap."""
    rates: list[tuple[float, float | None]] = []
    for (t0, v0), (t1, v1) in pairwise(points):
        dt = t1 - t0
        rates.append((t1, (v1 - v0) / dt if dt > 0 and v1 >= v0 else None))
    return rates


def server_charts(samples: Sequence[Mapping[str, Any]]) -> list[Markup]:
    """One chart per scraped series, a line per source (the engine, each
    replica: a deployment's imbalance shows as lines apart); ``*_total``
    counters are drawn as rates."""
    by_series: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for sample in sorted(samples, key=lambda s: s.get("t_s", 0.0)):
        for name, value in (sample.get("series") or {}).items():
            if isinstance(value, int | float):
                by_series[str(name)][str(sample.get("source", ""))].append(
                    (float(sample["t_s"]), float(value))
                )
    charts = []
    time = Axis(label="time since start", time=True)
    for name, sources in sorted(by_series.items()):
        rate = name.endswith("_total")
        title, unit = (f"{name} per second", "/s") if rate else (name, "value")
        series = [
            Series(source, counter_rate(points) if rate else points)
            for source, points in sorted(sources.items())
        ]
        charts.append(line_chart(series, title=title, x=time, y=Axis(label=unit)))
    return charts
