"""A repeat set's outputs (``slogate run --repeat N``): summary.json, report.html,
summary.md, metrics.prom and the table the command ends with.

Each reads the set's document through its contract
(:class:`~slogate.analysis.documents.contracts.Repeats`) and computes nothing: the
spreads and the combined verdict are :mod:`slogate.studies.repeats`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric, StateSetMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest
from tabulate import tabulate

from slogate.analysis.documents.contracts import Repeats, RepeatSlo, SpreadEntry, as_model
from slogate.analysis.documents.neutral import neutral_text
from slogate.reports.html import DASH, metric_value, percent, render
from slogate.reports.markdown import VERDICT_MARK, md
from slogate.reports.openmetrics import VERDICTS, unit_of
from slogate.reports.results import (
    MARKDOWN_FILE,
    METRICS_FILE,
    REPORT_FILE,
    SUMMARY_FILE,
    write_atomic,
)


def spread_text(s: SpreadEntry, metric: str) -> str:
    """``mean ± sd (CV x%) [lower, upper]`` in the metric's unit."""
    if s.mean is None:
        return DASH
    if s.sd is None:
        return metric_value(s.mean, metric)
    lower, upper = s.ci
    return (
        f"{metric_value(s.mean, metric)} ± {metric_value(s.sd, metric)} "
        f"(CV {percent(s.cv, 1)}) [{metric_value(lower, metric)}, {metric_value(upper, metric)}]"
    )


def threshold_text(slo: RepeatSlo) -> str:
    return f"{'<=' if slo.kind == 'max' else '>='} {metric_value(slo.threshold, slo.metric)}"


def runs_text(slo: RepeatSlo) -> str:
    """Each run's value; one a run could not bound (left out of the spread) says so."""
    return ", ".join(
        "unbounded" if v is None and verdict == "inconclusive" else metric_value(v, slo.metric)
        for v, verdict in zip(slo.values, slo.run_verdicts, strict=True)
    )


def rows(doc: Repeats) -> Iterator[tuple[str, RepeatSlo]]:
    for name, block in doc.scenarios.items():
        for slo in block.slo:
            yield name, slo


def repeats_table(doc: Repeats | Mapping[str, Any], report: Path | str) -> str:
    """The lines `slogate run --repeat` ends with: each SLO's runs and spread,
    why the set is invalid, and the exit code with the report's path."""
    doc = as_model(Repeats, doc, "summary")
    cells = [
        [name, f"{slo.metric} {slo.stat}", runs_text(slo), spread_text(slo, slo.metric),
         threshold_text(slo), slo.verdict.upper()]
        for name, slo in rows(doc)
    ]  # fmt: skip
    headers = ["scenario", "SLO", "runs", "mean ± sd (CV) [95% CI]", "threshold", "verdict"]
    lines = [tabulate(cells, headers=headers, disable_numparse=True)] if cells else []
    lines += [f"invalid: {reason}" for reason in doc.invalid_reasons]
    gate = doc.baseline
    if gate is not None and hasattr(gate, "verdict"):
        lines.append(f"against the baseline's spread: {gate.verdict}")
    verdict = doc.verdict.upper()
    lines.append(
        f"{len(doc.runs)} runs, combined verdict {verdict}, exit {doc.exit_code}: {report}"
    )
    return neutral_text("\n".join(lines))


def repeats_markdown(doc: Repeats, report_link: str) -> str:
    """The Markdown job summary of a repeat set."""
    lines = [
        f"## {VERDICT_MARK.get(doc.verdict, '')} slogate: {len(doc.runs)} repeats, "
        f"{md(doc.verdict.upper())} on their spread (exit {doc.exit_code})",
        "",
        "| run | verdict | exit |",
        "|---|---|--:|",
        *(f"| {md(r.dir)} | {md(r.verdict)} | {r.exit_code} |" for r in doc.runs),
        "",
        "| scenario | SLO | runs | mean ± sd (CV) [95% CI] | threshold | verdict |",
        "|---|---|---|---|--:|---|",
        *(
            f"| {md(name)} | {md(slo.metric)} {md(slo.stat)} | {md(runs_text(slo))} "
            f"| {md(spread_text(slo, slo.metric))} | {md(threshold_text(slo))} | {slo.verdict} |"
            for name, slo in rows(doc)
        ),
    ]
    lines += [f"- invalid: {md(reason)}" for reason in doc.invalid_reasons]
    if doc.baseline is not None and hasattr(doc.baseline, "verdict"):
        lines.append(f"- against the baseline's spread: {md(doc.baseline.verdict)}")
    lines += ["", f"[Full report]({report_link.replace(' ', '%20').replace(')', '%29')})", ""]
    return "\n".join(lines)


class RepeatsCollector:
    """A ``prometheus-client`` collector of a repeat set: each SLO's spread and
    verdict, the combined verdict and exit code."""

    def __init__(self, doc: Repeats) -> None:
        self.doc = doc

    def collect(self) -> Iterator[Metric]:
        labels = ["scenario", "slo", "unit"]
        families = {
            key: GaugeMetricFamily(f"slogate_repeat_slo_{key}", doc, labels=labels)
            for key, doc in (
                ("mean", "Mean of an SLO statistic across the runs"),
                ("sd", "Sample standard deviation of an SLO statistic across the runs"),
                ("cv", "Coefficient of variation (sd / mean) across the runs"),
                ("ci_lower", "Lower end of the Student-t interval of the mean"),
                ("ci_upper", "Upper end of the Student-t interval of the mean"),
                ("threshold", "The SLO's limit"),
            )
        }
        slo_verdict = StateSetMetricFamily(
            "slogate_repeat_slo_verdict",
            "Verdict of one SLO on its spread across the runs",
            labels=["scenario", "slo"],
        )
        for name, slo in rows(self.doc):
            target = [neutral_text(name), neutral_text(f"{slo.metric} {slo.stat}")]
            values = {"mean": slo.mean, "sd": slo.sd, "cv": slo.cv, "ci_lower": slo.ci[0],
                      "ci_upper": slo.ci[1], "threshold": slo.threshold}  # fmt: skip
            for key, value in values.items():
                if value is not None:
                    unit = "ratio" if key == "cv" else unit_of(slo.metric)
                    families[key].add_metric([*target, unit], value)
            slo_verdict.add_metric(target, {v: v == slo.verdict for v in VERDICTS})
        verdict = StateSetMetricFamily("slogate_repeat_verdict", "Combined verdict of the runs")
        verdict.add_metric([], {v: v == self.doc.verdict for v in VERDICTS})
        runs = GaugeMetricFamily("slogate_repeat_runs", "Runs in the repeat set")
        runs.add_metric([], len(self.doc.runs))
        code = GaugeMetricFamily("slogate_exit_code", "Exit code of the repeat set (the CI gate)")
        code.add_metric([], self.doc.exit_code)
        yield from (*families.values(), slo_verdict, verdict, runs, code)


def repeats_openmetrics(doc: Repeats) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RepeatsCollector(doc))
    return generate_latest(registry).decode("utf-8")


def write_repeats(out: Path, doc: Repeats | Mapping[str, Any]) -> dict[str, Path]:
    """summary.json, report.html, summary.md and metrics.prom of a repeat set."""
    data = doc if isinstance(doc, Mapping) else doc.model_dump(by_alias=True)
    model = as_model(Repeats, doc, str(out / SUMMARY_FILE))
    return {
        "summary": write_atomic(
            out / SUMMARY_FILE, json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        ),
        "report": write_atomic(out / REPORT_FILE, render("repeats.html.j2", d=model)),
        "markdown": write_atomic(out / MARKDOWN_FILE, repeats_markdown(model, REPORT_FILE)),
        "metrics": write_atomic(out / METRICS_FILE, repeats_openmetrics(model)),
    }
