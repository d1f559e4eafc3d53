"""``results/index.html``: the history dashboard of a results root.

Per scenario and target (engine, model): one trend chart per SLO over the runs,
its threshold drawn, each point's 95% confidence interval as a band, each run's
verdict as a marker linking to its report, and the runs that regressed against
the run before them (the rule of ``slogate compare``, decided in
:mod:`slogate.analysis.documents.history`) flagged. Then every run in a table with filters
by scenario, engine, model, revision and date. Built from each run's
``summary.json`` alone (no histograms), so it stays fast with a thousand runs.

Other tools' results kept in the root's ``baselines/`` folder (a vLLM ``bench
serve`` result, a GuideLLM report) are drawn on every chart of a statistic they
measured, as a labelled rule named as that tool names it, so a team's history
from before slogate stays in view.

It never overwrites a file it did not write: an ``index.html`` that is not a
slogate dashboard is left alone and the dashboard goes to ``slogate-index.html``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from markupsafe import Markup

from slogate.analysis.documents.history import (
    PastRun,
    Regression,
    read_runs,
    trend_regressions,
    trend_series,
)
from slogate.analysis.documents.other_tools import OtherRun, read_baselines
from slogate.reports.html import metric_value, render
from slogate.reports.results import REPORT_FILE, write_atomic
from slogate.reports.svg import Axis, Band, Marker, Rule, Series, line_chart
from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import ScenarioSummary, SloEntry

INDEX_FILE = "index.html"
FALLBACK_FILE = "slogate-index.html"
GENERATOR = '<meta name="generator" content="slogate history">'
COLUMNS = ((TTFT.key, "p99"), (ITL.key, "p99"), (TPOT.key, "p99"), (E2E.key, "p99"))
HEADLINE_SLOS = ({"metric": TTFT.key, "stat": "p99"}, {"metric": ITL.key, "stat": "p99"})


def revision(run: PastRun) -> str:
    return run.summary.run.git_revision or ""


def link(run: PastRun) -> str:
    return f"{quote(run.folder.name)}/{REPORT_FILE}"


def slo_of(run: PastRun, scenario: str, metric: str, stat: str) -> SloEntry | None:
    for slo in run.summary.scenarios[scenario].slo:
        if (slo.metric, slo.stat) == (metric, stat):
            return slo
    return None


def point_of(run: PastRun, scenario: str, metric: str, stat: str) -> dict[str, Any] | None:
    """An SLO's value, interval, threshold and verdict; a metric without an SLO
    gives its percentile and interval and the scenario's verdict."""
    slo = slo_of(run, scenario, metric, stat)
    if slo is not None:
        return {"value": slo.value, "ci": slo.ci, "threshold": slo.threshold,
                "verdict": slo.verdict}  # fmt: skip
    block = run.summary.scenarios[scenario]
    stats = block.metrics.get(metric)
    value = None if stats is None else getattr(stats, stat, None)
    if stats is None or value is None:
        return None
    ci = stats.ci.get(stat) or (None, None)
    return {"value": value, "ci": ci, "threshold": None, "verdict": block.verdict}


def trend_chart(
    runs: Sequence[PastRun],
    scenario: str,
    metric: str,
    stat: str,
    flagged: dict[tuple[str, str], list[Regression]],
    others: Sequence[OtherRun] = (),
) -> Markup:
    """One SLO over the runs (x: the run's position, oldest left); each other
    tool's baseline that measured it as a rule."""
    points, lows_highs, markers, threshold = [], [], [], None
    for x, run in enumerate(runs, start=1):
        p = point_of(run, scenario, metric, stat)
        if p is None or p["value"] is None:
            points.append((float(x), None))
            continue
        lower, upper = p.get("ci") or (None, None)
        points.append((float(x), p["value"]))
        lows_highs.append((float(x), lower, upper))
        threshold = p["threshold"] if p["threshold"] is not None else threshold
        label = f"{run.folder.name} {run.started}: {metric_value(p['value'], metric)}"
        markers.append(Marker(x, p["value"], p["verdict"] or "invalid", label, link(run)))
        for r in flagged.get((run.folder.name, scenario), ()):
            if (r.metric, r.stat) == (metric, stat):
                change = f"{r.change_pct:+.1f}%" if r.change_pct is not None else ""
                text = f"regression {change} against {r.base_folder}"
                markers.append(Marker(x, p["value"], "regression", text, link(run)))
    unit = "ms" if metric.endswith("_ms") else ""
    rules = [] if threshold is None else [Rule(threshold, f"threshold {threshold:g} {unit}")]
    rules += baseline_rules(others, metric, stat)
    return line_chart(
        [Series(f"{metric} {stat}", points)],
        title=f"{metric} {stat}",
        x=Axis("run"),
        y=Axis(unit),
        rules=rules,
        bands=[Band("95% confidence interval", lows_highs)],
        markers=markers,
        width=560,
    )


def baseline_rules(others: Sequence[OtherRun], metric: str, stat: str) -> list[Rule]:
    """A rule at each other tool's value of the statistic, labelled with its name."""
    rules = []
    for other in others:
        found = other.stat(metric, stat)
        if found is not None:
            value = metric_value(found.estimate.value, metric)
            rules.append(Rule(found.estimate.value, f"{other.label(found)} {value}"))
    return rules


@dataclass(frozen=True)
class Row:
    run: PastRun
    scenario: str
    regressions: list[Regression]

    @property
    def block(self) -> ScenarioSummary:
        return self.run.summary.scenarios[self.scenario]

    @property
    def date(self) -> str:
        return self.run.started[:10]

    def stat(self, metric: str, stat: str) -> float | None:
        stats = self.block.metrics.get(metric)
        return None if stats is None else getattr(stats, stat, None)


def sections(
    series: dict[tuple[str, str, str], list[PastRun]],
    flagged: dict[tuple[str, str], list[Regression]],
    others: Sequence[OtherRun] = (),
) -> list[dict[str, Any]]:
    out = []
    for (scenario, engine, model), runs in sorted(series.items()):
        declared = {(s.metric, s.stat) for r in runs for s in r.summary.scenarios[scenario].slo}
        keys = sorted(declared) or [(s["metric"], s["stat"]) for s in HEADLINE_SLOS]
        charts = [trend_chart(runs, scenario, m, s, flagged, others) for m, s in keys]
        regressed = sum((r.folder.name, scenario) in flagged for r in runs)
        out.append(
            {"scenario": scenario, "engine": engine, "model": model, "runs": len(runs),
             "charts": charts, "regressed": regressed}
        )  # fmt: skip
    return out


def dashboard_html(
    runs: list[PastRun],
    unreadable: list[str],
    others: Sequence[OtherRun] = (),
    not_baselines: Sequence[str] = (),
) -> str:
    series = trend_series(runs)
    flagged = trend_regressions(series)
    rows = [
        Row(run, scenario, flagged.get((run.folder.name, scenario), []))
        for run in reversed(runs)
        for scenario in run.summary.scenarios
    ]

    def choices(values: Sequence[str]) -> list[str]:
        return sorted({v for v in values if v})

    filters = {
        "scenario": choices([r.scenario for r in rows]),
        "engine": choices([r.run.target[0] for r in rows]),
        "model": choices([r.run.target[1] for r in rows]),
        "revision": choices([revision(r.run) for r in rows]),
    }  # fmt: skip
    return render(
        "index.html.j2",
        generator=Markup(GENERATOR),
        runs=runs,
        rows=rows,
        sections=sections(series, flagged, others),
        filters=filters,
        columns=COLUMNS,
        unreadable=unreadable,
        others=others,
        not_baselines=not_baselines,
        link=link,
    )


def ours(path: Path) -> bool:
    """Whether ``path`` is free to write: absent, or a dashboard this module wrote."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return GENERATOR in handle.read(4096)
    except FileNotFoundError:
        return True


def write_index(results_root: str | os.PathLike[str]) -> Path | None:
    """Write the dashboard of the runs under ``results_root``: ``index.html``, or
    ``slogate-index.html`` when an ``index.html`` there is not ours; None when
    neither file is ours to write."""
    root = Path(results_root)
    target = next((root / n for n in (INDEX_FILE, FALLBACK_FILE) if ours(root / n)), None)
    if target is None:
        return None
    unreadable: list[str] = []
    runs = read_runs(root, unreadable)
    not_baselines: list[str] = []
    others = read_baselines(root, not_baselines)
    page = dashboard_html(runs, sorted(unreadable), others, not_baselines)
    return write_atomic(target, page)
