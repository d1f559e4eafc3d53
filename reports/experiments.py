"""Pages and CSVs of controlled experiments and sweeps, in the run report's style.

An experiment or sweep document (``experiment.json``/``sweep.json``) is a list
of points, each with an ``x`` (the factor's value), pooled metrics and
throughput, and the runs behind it. This module draws the classic plots
from it (TTFT vs prompt length, TPOT vs output length, latency vs throughput
with concurrency, memory and speed by weight precision, p99 vs load for a
sweep), renders one self-contained HTML page and flattens the points to CSV.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from slogate.analysis.documents.contracts import (
    Distribution,
    Experiment,
    Requests,
    Sweep,
    SweepPoint,
    Throughput,
    as_model,
)
from slogate.analysis.verdict.slo import is_latency_percentile
from slogate.reports.html import render
from slogate.reports.results import write_atomic
from slogate.reports.svg import Axis, Rule, Series, line_chart
from slogate.reports.tables import to_csv
from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT
from slogate.studies.speculation import ARMS, OFF, ON, arm_of

GB = 1e9


Read = Callable[[SweepPoint], float | None]


@dataclass(frozen=True)
class ChartSpec:
    """One chart: ``ys`` are (legend, what to read of a point) drawn against ``x``."""

    title: str
    x: Read
    x_label: str
    ys: tuple[tuple[str, Read], ...]
    y_label: str
    log_x: bool = False


def stat_of(metric: str, stat: str) -> Read:
    """A point's pooled ``stat`` of ``metric`` (None where not measured)."""

    def read(point: SweepPoint) -> float | None:
        d = point.metrics.get(metric)
        return None if d is None else getattr(d, stat)

    return read


def stats(metric: str, label: str) -> tuple[tuple[str, Read], ...]:
    return tuple((f"{label} {stat}", stat_of(metric, stat)) for stat in ("mean", "p95", "p99"))


def x_of(point: SweepPoint) -> float | None:
    return point.x


def output_tps(point: SweepPoint) -> float | None:
    return None if point.throughput is None else point.throughput.output_tokens_per_s


def weight_gb(point: SweepPoint) -> float | None:
    return (point.weight_bytes or 0) / GB or None


FACTOR_CHARTS: dict[str, tuple[ChartSpec, ...]] = {
    "prompt-length": (
        ChartSpec(
            "TTFT vs prompt length",
            x_of,
            "prompt tokens",
            stats(TTFT.key, "TTFT"),
            "ms",
            log_x=True,
        ),
        ChartSpec(
            "E2E vs prompt length", x_of, "prompt tokens", stats(E2E.key, "E2E"), "ms", log_x=True
        ),
    ),
    "output-length": (
        ChartSpec(
            "TPOT vs output length",
            x_of,
            "output tokens",
            stats(TPOT.key, "TPOT"),
            "ms",
            log_x=True,
        ),
        ChartSpec(
            "E2E vs output length", x_of, "output tokens", stats(E2E.key, "E2E"), "ms", log_x=True
        ),
    ),
    "concurrency": (
        ChartSpec(
            "Latency vs throughput (points: concurrency)",
            output_tps,
            "output tokens/s",
            stats(E2E.key, "E2E"),
            "ms",
        ),
        ChartSpec(
            "Throughput vs concurrency",
            x_of,
            "concurrent users",
            (("output tokens/s", output_tps),),
            "tokens/s",
            log_x=True,
        ),
        ChartSpec(
            "TTFT vs concurrency",
            x_of,
            "concurrent users",
            stats(TTFT.key, "TTFT"),
            "ms",
            log_x=True,
        ),
        ChartSpec(
            "TPOT vs concurrency",
            x_of,
            "concurrent users",
            stats(TPOT.key, "TPOT"),
            "ms",
            log_x=True,
        ),
    ),
    "precision": (
        ChartSpec(
            "Weight memory by precision",
            x_of,
            "bytes per weight",
            (("weights GB", weight_gb),),
            "GB",
        ),
        ChartSpec("TPOT by precision", x_of, "bytes per weight", stats(TPOT.key, "TPOT"), "ms"),
        ChartSpec(
            "Throughput by precision",
            x_of,
            "bytes per weight",
            (("output tokens/s", output_tps),),
            "tokens/s",
        ),
    ),
}


def chart(points: Sequence[SweepPoint], spec: ChartSpec, rules: Sequence[Rule] = ()) -> Markup:
    ordered = sorted(points, key=lambda p: spec.x(p) or 0.0)
    series = []
    for name, read in spec.ys:
        pts = [(spec.x(p), read(p)) for p in ordered]
        series.append(Series(name, [(x, y) for x, y in pts if x is not None]))
    return line_chart(
        series,
        title=spec.title,
        x=Axis(spec.x_label, log=spec.log_x),
        y=Axis(spec.y_label),
        rules=rules,
    )


# -- CSV -----------------------------------------------------------------------------
POINT_STATS = ("count", "mean", "p50", "p95", "p99")
RUN_STATS = ("mean", "p50", "p95", "p99")
POINT_COLUMNS = [
    "label",
    "x",
    "runs",
    "requests_ok",
    "requests_failed",
    "requests_per_s",
    "output_tokens_per_s",
    "input_tokens_per_s",
    *(
        f"{m}_{s}"
        for m in (TTFT.key, TPOT.key, ITL.key, E2E.key)
        for s in ("count", "mean", "p50", "p95", "p99")
    ),
    "weight_bytes",
    "cost_per_million_output",
    "cost_per_million_input",
    "verdicts",
]


def block_columns(
    requests: Requests | None,
    throughput: Throughput | None,
    metrics: Mapping[str, Distribution],
    stats: Sequence[str],
) -> dict[str, Any]:
    """The columns a point and a run share: requests, throughput, latency stats."""
    rates = ("requests_per_s", "output_tokens_per_s", "input_tokens_per_s")
    row: dict[str, Any] = {
        "requests_ok": None if requests is None else requests.ok,
        "requests_failed": None if requests is None else requests.failed,
        **{rate: None if throughput is None else getattr(throughput, rate) for rate in rates},
    }
    for metric in (TTFT.key, TPOT.key, ITL.key, E2E.key):
        d = metrics.get(metric)
        for stat in stats:
            row[f"{metric}_{stat}"] = None if d is None else getattr(d, stat)
    return row


def point_row(point: SweepPoint) -> dict[str, Any]:
    """One point as a flat CSV row (pooled over its runs)."""
    cost = point.cost
    return {
        "label": point.label,
        "x": point.x,
        "runs": " ".join(r.dir for r in point.runs),
        **block_columns(point.requests, point.throughput, point.metrics, POINT_STATS),
        "weight_bytes": point.weight_bytes,
        "cost_per_million_output": None if cost is None else cost.per_million_output_tokens,
        "cost_per_million_input": None if cost is None else cost.per_million_input_tokens,
        "verdicts": " ".join(r.verdict for r in point.runs),
    }


RUN_COLUMNS = [
    "label",
    "x",
    "repeat",
    "dir",
    "verdict",
    "exit_code",
    "requests_ok",
    "requests_failed",
    "requests_per_s",
    "output_tokens_per_s",
    "input_tokens_per_s",
    *(
        f"{m}_{s}"
        for m in (TTFT.key, TPOT.key, ITL.key, E2E.key)
        for s in ("mean", "p50", "p95", "p99")
    ),
]


def run_rows(points: Sequence[SweepPoint]) -> list[dict[str, Any]]:
    """One row per run, from each run's own summary (the raw numbers behind a point)."""
    rows = []
    for point in points:
        for run in point.runs:
            block = run.scenario
            columns = (
                block_columns(None, None, {}, RUN_STATS)
                if block is None
                else block_columns(block.requests, block.throughput, block.metrics, RUN_STATS)
            )
            rows.append(
                {
                    "label": point.label,
                    "x": point.x,
                    "repeat": run.repeat,
                    "dir": run.dir,
                    "verdict": run.verdict,
                    "exit_code": run.exit_code,
                    **columns,
                }
            )
    return rows


def write_csvs(out: Path, points: Sequence[SweepPoint]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return {
        "points": write_atomic(out / "points.csv", to_csv(POINT_COLUMNS, map(point_row, points))),
        "runs": write_atomic(out / "runs.csv", to_csv(RUN_COLUMNS, run_rows(points))),
    }


# -- pages ---------------------------------------------------------------------------
def experiment_charts(experiment: Experiment) -> list[Markup]:
    if experiment.factor == "speculative":
        return speculation_charts(experiment)
    return [chart(experiment.points, spec) for spec in FACTOR_CHARTS[experiment.factor]]


def speculation_charts(experiment: Experiment) -> list[Markup]:
    """TPOT and throughput against load for each arm, and the speedup with
    the crossover: where the line falls through 1, speculation stops paying."""
    users = Axis("concurrent users", log=True)
    arms = {arm: [p for p in experiment.points if arm_of(p.label or "") == arm] for arm in ARMS}
    charts = [
        line_chart(
            [
                Series(
                    f"{label} speculation", [(p.x, read(p)) for p in arms[arm] if p.x is not None]
                )
                for arm, label in ((OFF, "without"), (ON, "with"))
            ],
            title=title,
            x=users,
            y=Axis(unit),
        )
        for title, read, unit in (
            ("TPOT by load, with and without speculation", stat_of(TPOT.key, "mean"), "ms"),
            ("Throughput by load, with and without speculation", output_tps, "tokens/s"),
        )
    ]
    found = (experiment.model_extra or {}).get("speculation") or {}
    pairs = [(float(x), float(r)) for x, r in found.get("speedups") or []]
    crossing = (found.get("crossover") or {}).get("users")
    rules = [Rule(1.0, "pays above 1", crossing)]
    charts.append(
        line_chart(
            [Series("TPOT without / with", pairs)],
            title="Speculation's speedup by load"
            + ("" if crossing is None else f" (crossover ~{crossing:g} users)"),
            x=users,
            y=Axis("x"),
            rules=rules,
        )
    )
    return charts


def write_experiment(out: Path, doc: Experiment | Mapping[str, Any]) -> dict[str, Path]:
    """experiment.html, points.csv and runs.csv of an experiment document, read
    through its contract."""
    experiment = as_model(Experiment, doc, str(out / "experiment.json"))
    files = write_csvs(out, experiment.points)
    page = render("experiment.html.j2", d=experiment, charts=experiment_charts(experiment))
    files["report"] = write_atomic(out / "report.html", page)
    return files


def latency_slos(sweep: Sweep) -> list[tuple[str, str, float | None]]:
    """The scenario's latency SLOs on a percentile (what a sweep plots against):
    metric, stat and threshold; TTFT and TPOT p99 without a threshold when none."""
    slos: list[tuple[str, str, float | None]] = [
        (s.metric, s.stat, s.threshold)
        for s in sweep.slo
        if is_latency_percentile(s.metric, s.stat)
    ]
    return slos or [(TTFT.key, "p99", None), (TPOT.key, "p99", None)]


def sweep_charts(sweep: Sweep) -> list[Markup]:
    points = sweep.points
    x_label = "offered rate (requests/s)" if sweep.mode == "rate" else "concurrent users"
    knee = sweep.knee
    charts = []
    for metric, stat, threshold in latency_slos(sweep):
        name = metric.removesuffix("_ms").upper()
        rules = []
        if threshold is not None:
            rules.append(Rule(threshold, f"SLO {stat} ≤ {threshold:g} ms"))
        load_rules = list(rules)
        if knee and knee.metric == metric and knee.stat == stat:
            load_rules.append(Rule(knee.y, f"knee at {knee.x:g}", knee.x))
        ys = ((f"{name} {stat}", stat_of(metric, stat)),)
        spec_t = ChartSpec(f"{name} {stat} vs throughput", output_tps, "output tokens/s", ys, "ms")
        spec_x = ChartSpec(f"{name} {stat} vs load", x_of, x_label, ys, "ms")
        charts += [chart(points, spec_t, rules), chart(points, spec_x, load_rules)]
    throughput = ChartSpec(
        "Throughput vs load", x_of, x_label, (("output tokens/s", output_tps),), "tokens/s"
    )
    charts.append(chart(points, throughput))
    return charts


def write_sweep(out: Path, doc: Sweep | Mapping[str, Any]) -> dict[str, Path]:
    """sweep report.html, points.csv and runs.csv of a sweep document, read
    through its contract."""
    sweep = as_model(Sweep, doc, str(out / "sweep.json"))
    files = write_csvs(out, sweep.points)
    page = render("sweep.html.j2", d=sweep, charts=sweep_charts(sweep))
    files["report"] = write_atomic(out / "report.html", page)
    return files


def write_document(path: Path, doc: Mapping[str, Any]) -> Path:
    """A study's JSON document (sweep.json, experiment.json), written whole."""
    return write_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
