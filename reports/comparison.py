"""Output of ``slogate compare``: a text table for the terminal, JSON and HTML files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from slogate.analysis.verdict.compare import Comparison, Delta
from slogate.reports.html import metric_value, render, signed_pct
from slogate.reports.results import write_atomic

COMPARISON_JSON = "comparison.json"
COMPARISON_HTML = "comparison.html"


def cell(delta: Delta, which: str) -> str:
    e = delta.base if which == "base" else delta.new
    return "-" if e is None else metric_value(e.value, delta.metric)


def row_name(delta: Delta) -> str:
    """The statistic, and the baseline's own name for it when another tool made it."""
    name = f"{delta.scenario} {delta.metric} {delta.stat}"
    return name if delta.base_name is None else f"{name} [{delta.base_name}]"


def comparison_text(comparison: Comparison, all_rows: bool = False) -> str:
    """The verdict line, then the gated percentiles (every row with ``all_rows``)."""
    c = comparison
    lines = [
        f"{c.verdict.upper()}: {len(c.regressions)} regression(s), {len(c.cannot_tell)} "
        f"that cannot be told from the generators' error; tolerance "
        f"{100 * c.tolerance:g}%, gated {', '.join(c.gated)}, baseline {c.base_run or '?'} "
        f"-> {c.new_run or '?'}"
    ]
    rows = [d for d in c.deltas if all_rows or d.gated]
    width = max((len(row_name(d)) for d in rows), default=10)
    for d in rows:
        name = row_name(d)
        status = "REGRESSION" if d.regression else d.status.upper() if d.cannot_tell else d.status
        if d.within_generator_error:
            status += f" (within the generators' ±{d.generator_error_ms:.3f} ms)"
        lines.append(
            f"  {name:<{width}}  {cell(d, 'base'):>14} -> {cell(d, 'new'):>14}"
            f"  {signed_pct(d.change_pct):>8}  {status}"
        )
    for label, names in (("only in baseline", c.only_in_base), ("only in new", c.only_in_new)):
        if names:
            lines.append(f"  {label}: {', '.join(names)}")
    if c.blocked:
        lines.append(
            "  the gate cannot tell whether the server or the load generator moved the "
            "CANNOT-TELL rows: exit 3 (--allow-uncertain lets them pass)"
        )
    return "\n".join(lines)


def write_comparison(out_dir: str | os.PathLike[str], comparison: Comparison) -> dict[str, Path]:
    """Write comparison.json and a self-contained comparison.html into ``out_dir``;
    the page renders the document as its contract reads it, as the report does."""
    from slogate.analysis.documents.contracts import Comparison as ComparisonDocument
    from slogate.analysis.documents.contracts import parse

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = comparison.to_dict()
    document = parse(ComparisonDocument, data, COMPARISON_JSON)
    return {
        "json": write_atomic(out / COMPARISON_JSON, json.dumps(data, indent=1) + "\n"),
        "html": write_atomic(out / COMPARISON_HTML, render("compare.html.j2", c=document)),
    }
