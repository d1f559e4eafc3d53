"""The verdict table a CI log ends with: each SLO, its value with its 95%
interval, the threshold, the margin and the verdict, then the exit code and the
report's path.

It renders what the judge already decided (the ``slo`` entries of summary.json,
built by :mod:`slogate.analysis.verdict.slo`) and computes nothing of its own, so the
table, the report and the exit code cannot disagree. Plain text, no colour: CI
logs are read as text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from slogate.analysis.documents.contracts import SloEntry, Summary, as_model
from slogate.analysis.documents.neutral import neutral_text

Row = tuple[str, SloEntry]  # (scenario, SLO as judged)


def number(value: float | None) -> str:
    """Four significant digits, thousands without an exponent; "-" when unmeasured."""
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def unit(slo: SloEntry) -> str:
    return " ms" if slo.metric.endswith("_ms") else ""


def measured(slo: SloEntry) -> str:
    lower, upper = slo.ci
    interval = "" if lower is None and upper is None else f" [{number(lower)}, {number(upper)}]"
    return f"{number(slo.value)}{unit(slo)}{interval}"


def threshold(slo: SloEntry) -> str:
    sign = "<=" if slo.kind == "max" else ">="
    return f"{sign} {number(slo.threshold)}{unit(slo)}"


def margin(slo: SloEntry) -> str:
    if slo.margin is None:
        return "-"
    share = "" if slo.margin_pct is None else f" ({slo.margin_pct:+.0f}%)"
    return f"{slo.margin:+.4g}{unit(slo)}{share}"


# One (header, cell) per column, in order. A new column (the generator's error
# bound, once the judge decides with it) is one more entry here, read from the
# same slo entry.
COLUMNS: tuple[tuple[str, Callable[[str, SloEntry], str]], ...] = (
    ("scenario", lambda scenario, _: scenario),
    ("SLO", lambda _, slo: f"{slo.metric} {slo.stat}"),
    ("value [95% CI]", lambda _, slo: measured(slo)),
    ("threshold", lambda _, slo: threshold(slo)),
    ("margin", lambda _, slo: margin(slo)),
    ("verdict", lambda _, slo: slo.verdict.upper()),
)


def slo_rows(summary: Summary) -> list[Row]:
    return [(name, slo) for name, block in summary.scenarios.items() for slo in block.slo]


def verdict_table(summary: Summary | Mapping[str, Any], report: Path | str) -> str:
    """The lines to print last: the SLO table, why a run is invalid or a verdict
    undecided, and the exit code with the report's path. A summary given as a
    mapping (summary.json as written) is read through its contract."""
    summary = as_model(Summary, summary, "summary")
    rows = slo_rows(summary)
    lines = []
    if rows:
        cells = [[cell(name, slo) for _, cell in COLUMNS] for name, slo in rows]
        lines.append(tabulate(cells, headers=[h for h, _ in COLUMNS], disable_numparse=True))
    else:
        lines.append("no SLO declared: the verdict rests on the run's validity alone")
    for name, slo in rows:
        if slo.note and slo.verdict != "pass":
            lines.append(f"{name} {slo.metric} {slo.stat}: {slo.note}")
    for reason in summary.invalid_reasons:
        lines.append(f"invalid: {reason}")
    lines.append(f"verdict {summary.verdict.upper()}, exit {summary.exit_code}: {report}")
    return neutral_text("\n".join(lines))
