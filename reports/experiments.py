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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from slogate.analysis.experiment import lookup, value_at
from slogate.analysis.slo import is_latency_percentile
from slogate.reports.html import render
from slogate.reports.results import write_atomic
from slogate.reports.svg import Axis, Rule, Series, line_chart
from slogate.reports.tables import to_csv

Path_ = tuple[str, ...]
GB = 1e9


@dataclass(frozen=True)
class ChartSpec:
    """One chart: ``ys`` are (legend, path into a point) drawn against ``x``."""

    title: str
    x: Path_
    x_label: str
    ys: tuple[tuple[str, Path_], ...]
    y_label: str
    log_x: bool = False


def stats(metric: str, label: str) -> tuple[tuple[str, Path_], ...]:
    return tuple((f"{label} {stat}", ("metrics", metric, stat)) for stat in ("mean", "p95", "p99"))


X: Path_ = ("x",)
OUTPUT_TPS: Path_ = ("throughput", "output_tokens_per_s")
FACTOR_CHARTS: dict[str, tuple[ChartSpec, ...]] = {
    "prompt-length": (
        ChartSpec(
            "TTFT vs prompt length", X, "prompt tokens", stats("ttft_ms", "TTFT"), "ms", log_x=True
        ),
        ChartSpec(
            "E2E vs prompt length", X, "prompt tokens", stats("e2e_ms", "E2E"), "ms", log_x=True
        ),
    ),
    "output-length": (
        ChartSpec(
            "TPOT vs output length", X, "output tokens", stats("tpot_ms", "TPOT"), "ms", log_x=True
        ),
        ChartSpec(
            "E2E vs output length", X, "output tokens", stats("e2e_ms", "E2E"), "ms", log_x=True
        ),
    ),
    "concurrency": (
        ChartSpec(
            "Latency vs throughput (points: concurrency)",
            OUTPUT_TPS,
            "output tokens/s",
            stats("e2e_ms", "E2E"),
            "ms",
        ),
        ChartSpec(
            "Throughput vs concurrency",
            X,
            "concurrent users",
            (("output tokens/s", OUTPUT_TPS),),
            "tokens/s",
            log_x=True,
        ),
        ChartSpec(
            "TTFT vs concurrency", X, "concurrent users", stats("ttft_ms", "TTFT"), "ms", log_x=True
        ),
        ChartSpec(
            "TPOT vs concurrency", X, "concurrent users", stats("tpot_ms", "TPOT"), "ms", log_x=True
        ),
    ),
    "precision": (
        ChartSpec(
            "Weight memory by precision",
            X,
            "bytes per weight",
            (("weights GB", ("weight_gb",)),),
            "GB",
        ),
        ChartSpec("TPOT by precision", X, "bytes per weight", stats("tpot_ms", "TPOT"), "ms"),
        ChartSpec(
            "Throughput by precision",
            X,
            "bytes per weight",
            (("output tokens/s", OUTPUT_TPS),),
            "tokens/s",
        ),
    ),
}


def chart(
    points: Sequence[Mapping[str, Any]], spec: ChartSpec, rules: Sequence[Rule] = ()
) -> Markup:
    ordered = sorted(points, key=lambda p: lookup(p, spec.x) or 0.0)
    series = []
    for name, path in spec.ys:
        pts = [(lookup(p, spec.x), lookup(p, path)) for p in ordered]
        series.append(Series(name, [(x, y) for x, y in pts if x is not None]))
    return line_chart(
        series,
        title=spec.title,
        x=Axis(spec.x_label, log=spec.log_x),
        y=Axis(spec.y_label),
        rules=rules,
    )


# -- CSV -----------------------------------------------------------------------------
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
        for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
        for s in ("count", "mean", "p50", "p95", "p99")
    ),
    "weight_bytes",
    "cost_per_million_output",
    "cost_per_million_input",
    "verdicts",
]


def point_row(point: Mapping[str, Any]) -> dict[str, Any]:
    """One point as a flat CSV row (pooled over its runs)."""
    row: dict[str, Any] = {
        "label": point["label"],
        "x": point["x"],
        "runs": " ".join(r["dir"] for r in point["runs"]),
        "requests_ok": value_at(point, ("requests", "ok")),
        "requests_failed": value_at(point, ("requests", "failed")),
        "requests_per_s": value_at(point, ("throughput", "requests_per_s")),
        "output_tokens_per_s": value_at(point, OUTPUT_TPS),
        "input_tokens_per_s": value_at(point, ("throughput", "input_tokens_per_s")),
        "weight_bytes": point.get("weight_bytes"),
        "cost_per_million_output": value_at(point, ("cost", "per_million_output_tokens")),
        "cost_per_million_input": value_at(point, ("cost", "per_million_input_tokens")),
        "verdicts": " ".join(r["verdict"] for r in point["runs"]),
    }
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        for stat in ("count", "mean", "p50", "p95", "p99"):
            row[f"{metric}_{stat}"] = value_at(point, ("metrics", metric, stat))
    return row


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
        for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
        for s in ("mean", "p50", "p95", "p99")
    ),
]


def run_rows(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per run, from each run's own summary (the raw numbers behind a point)."""
    rows = []
    for point in points:
        for run in point["runs"]:
            block = run.get("scenario") or {}
            row: dict[str, Any] = {
                "label": point["label"],
                "x": point["x"],
                "repeat": run.get("repeat"),
                "dir": run["dir"],
                "verdict": run["verdict"],
                "exit_code": run["exit_code"],
                "requests_ok": value_at(block, ("requests", "ok")),
                "requests_failed": value_at(block, ("requests", "failed")),
                "requests_per_s": value_at(block, ("throughput", "requests_per_s")),
                "output_tokens_per_s": value_at(block, OUTPUT_TPS),
                "input_tokens_per_s": value_at(block, ("throughput", "input_tokens_per_s")),
            }
            for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
                for stat in ("mean", "p50", "p95", "p99"):
                    row[f"{metric}_{stat}"] = value_at(block, ("metrics", metric, stat))
            rows.append(row)
    return rows


def write_csvs(out: Path, points: Sequence[Mapping[str, Any]]) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return {
        "points": write_atomic(out / "points.csv", to_csv(POINT_COLUMNS, map(point_row, points))),
        "runs": write_atomic(out / "runs.csv", to_csv(RUN_COLUMNS, run_rows(points))),
    }


# -- pages ---------------------------------------------------------------------------
def experiment_charts(doc: Mapping[str, Any]) -> list[Markup]:
    points = [{**p, "weight_gb": (p.get("weight_bytes") or 0) / GB or None} for p in doc["points"]]
    return [chart(points, spec) for spec in FACTOR_CHARTS[doc["factor"]]]


def write_experiment(out: Path, doc: Mapping[str, Any]) -> dict[str, Path]:
    """experiment.html, points.csv and runs.csv of an experiment document."""
    files = write_csvs(out, doc["points"])
    page = render("experiment.html.j2", d=doc, charts=experiment_charts(doc))
    files["report"] = write_atomic(out / "report.html", page)
    return files


def latency_slos(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The scenario's latency SLOs on a percentile (what a sweep plots against)."""
    return [s for s in doc.get("slo") or [] if is_latency_percentile(s["metric"], s["stat"])]


def sweep_charts(doc: Mapping[str, Any]) -> list[Markup]:
    points = doc["points"]
    x_label = "offered rate (requests/s)" if doc["mode"] == "rate" else "concurrent users"
    slos = latency_slos(doc) or [
        {"metric": "ttft_ms", "stat": "p99", "threshold": None},
        {"metric": "tpot_ms", "stat": "p99", "threshold": None},
    ]
    charts = []
    for slo in slos:
        metric, stat = slo["metric"], slo["stat"]
        name = metric.removesuffix("_ms").upper()
        rules = []
        if slo.get("threshold") is not None:
            rules.append(Rule(slo["threshold"], f"SLO {stat} ≤ {slo['threshold']:g} ms"))
        knee = doc.get("knee")
        load_rules = list(rules)
        if knee and knee["metric"] == metric and knee["stat"] == stat:
            load_rules.append(Rule(knee["y"], f"knee at {knee['x']:g}", knee["x"]))
        spec_t = ChartSpec(
            f"{name} {stat} vs throughput",
            OUTPUT_TPS,
            "output tokens/s",
            ((f"{name} {stat}", ("metrics", metric, stat)),),
            "ms",
        )
        spec_x = ChartSpec(
            f"{name} {stat} vs load",
            X,
            x_label,
            ((f"{name} {stat}", ("metrics", metric, stat)),),
            "ms",
        )
        charts += [chart(points, spec_t, rules), chart(points, spec_x, load_rules)]
    throughput = ChartSpec(
        "Throughput vs load", X, x_label, (("output tokens/s", OUTPUT_TPS),), "tokens/s"
    )
    charts.append(chart(points, throughput))
    return charts


def write_sweep(out: Path, doc: Mapping[str, Any]) -> dict[str, Path]:
    """sweep report.html, points.csv and runs.csv of a sweep document."""
    files = write_csvs(out, doc["points"])
    page = render("sweep.html.j2", d=doc, charts=sweep_charts(doc))
    files["report"] = write_atomic(out / "report.html", page)
    return files


def write_document(path: Path, doc: Mapping[str, Any]) -> Path:
    """A study's JSON document (sweep.json, experiment.json), written whole."""
    return write_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
