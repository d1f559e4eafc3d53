"""A run's results folder: summary.json, junit.xml, the CSVs and report.html.

Everything here is a function of :class:`~slogate.analysis.documents.rundata.RunData` (and an
optional baseline run), so ``slogate report DIR`` rebuilds the same files from
``DIR/data/``. Files are written whole and then renamed into place: a crash
never leaves half a report for CI to read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.summary import build_summary
from slogate.analysis.measurement.timelines import Timelines
from slogate.analysis.measurement.timeseries import apart_series
from slogate.analysis.verdict.compare import DEFAULT_TOLERANCE, Comparison
from slogate.analysis.verdict.judge import judge
from slogate.reports.charts import (
    apart_charts,
    percentile_charts,
    server_charts,
    timeseries_charts,
)
from slogate.reports.html import render
from slogate.reports.junit import junit_xml
from slogate.reports.markdown import summary_markdown
from slogate.reports.openmetrics import openmetrics_text
from slogate.reports.request_timeline import timeline_html
from slogate.reports.svg import Cut
from slogate.reports.tables import percentiles_csv, timeseries_csv
from slogate.scenarios.metrics import LABELS

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import Summary

SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"
PERCENTILES_FILE = "percentiles.csv"
TIMESERIES_FILE = "timeseries.csv"
MARKDOWN_FILE = "summary.md"
METRICS_FILE = "metrics.prom"
TIMELINE_FILE = "timeline.html"


@dataclass(frozen=True)
class Outcome:
    """What a rendering produced: the verdict, the exit code the CLI should
    return, the files, and the baseline comparison when one was made."""

    verdict: str
    exit_code: int
    out_dir: Path
    files: dict[str, Path]
    summary: dict[str, Any] = field(repr=False)
    comparison: Comparison | None = None


def write_atomic(path: Path, content: str | bytes) -> Path:
    """Write then rename: a reader never sees half a file, and a write that fails
    (disk full) leaves no ``.tmp`` behind and names the file it was writing
    (a failed ``write`` names none)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        if isinstance(content, bytes):
            tmp.write_bytes(content)
        else:
            tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename is None:
            error.filename = str(tmp)
        raise
    return path


def kept_timelines(run: RunData) -> Timelines | None:
    """The requests' timelines, None where the run kept none (no page for them)."""
    return run.timelines if run.timelines is not None and len(run.timelines) > 0 else None


def warmup_cut(summary: Summary) -> Cut | None:
    """Where the measured window starts on the time-series charts: the warm-up
    given, or the cut ``--warmup auto`` found; None without warm-up."""
    run = summary.run
    if not run.warmup_s:
        return None
    how = "MSER" if run.warmup_auto else "given"
    return Cut(run.warmup_s, f"warm-up cut {run.warmup_s:g} s ({how})")


def engine_acceptance(summary: Summary) -> list[tuple[float, float | None]]:
    """The engine's speculative acceptance between its scrapes, for the charts."""
    found = summary.speculation
    return [] if found is None else [(w.t_s, w.acceptance_rate) for w in found.windows]


def report_html(summary: Summary, run: RunData, baseline: RunData | None) -> str:
    """The self-contained HTML page: the summary, read through its contract,
    plus charts drawn from the run, linking the request timeline beside it."""
    scenarios = []
    cut = warmup_cut(summary)
    for name, block in summary.scenarios.items():
        rows = [r for r in run.timeseries if r.get("scenario") == name]
        rows.sort(key=lambda r: r["t_s"])
        scenarios.append(
            {
                "name": name,
                "block": block,
                "percentile_charts": percentile_charts(run, name, block.slo, baseline),
                "timeseries_charts": timeseries_charts(
                    rows, block.slo, cut, engine_acceptance(summary)
                ),
                "apart_charts": {
                    kind: apart_charts(
                        apart_series(run.timeseries_apart, name, kind), kind, block.slo, cut
                    )
                    for kind in ("endpoint", "replica")
                },
            }
        )
    slo_rows = [(name, slo) for name, block in summary.scenarios.items() for slo in block.slo]
    total = sum(block.requests.total for block in summary.scenarios.values())
    return render(
        "report.html.j2",
        s=summary,
        scenarios=scenarios,
        slo_rows=slo_rows,
        total_requests=total,
        labels=LABELS,
        server_charts=server_charts(run.server_metrics),
        timeline=TIMELINE_FILE if kept_timelines(run) is not None else None,
    )


def write_results(
    out_dir: str | os.PathLike[str],
    run: RunData,
    baseline: RunData | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Outcome:
    """Write every output file of ``run`` into ``out_dir``; with ``baseline`` the
    comparison goes into the summary and the report. Returns the verdict and exit code."""
    return render_run(Path(out_dir), run, baseline, tolerance, baseline_error=None)


def render_run(
    out: Path,
    run: RunData,
    baseline: RunData | None,
    tolerance: float,
    baseline_error: str | None,
) -> Outcome:
    """Judge, then write what the judge decided."""
    out.mkdir(parents=True, exist_ok=True)
    judgement = judge(run, baseline, tolerance, baseline_error)
    summary = build_summary(run, judgement)
    compared = baseline if judgement.comparison else None
    return write_files(out, summary, run, compared, judgement.comparison)


def write_files(
    out: Path,
    summary: dict[str, Any],
    run: RunData,
    baseline: RunData | None,
    comparison: Comparison | None,
) -> Outcome:
    from slogate.analysis.documents.contracts import (  # pydantic: not in load processes
        Summary,
        parse,
    )

    # the writer holds to its own contract, and reads what it decides through it
    contract = parse(Summary, summary, str(out / SUMMARY_FILE))
    files = {
        "summary": write_atomic(
            out / SUMMARY_FILE, json.dumps(summary, indent=1, ensure_ascii=False) + "\n"
        ),
        "junit": write_atomic(out / JUNIT_FILE, junit_xml(contract)),
        "percentiles": write_atomic(out / PERCENTILES_FILE, percentiles_csv(contract)),
        "timeseries": write_atomic(
            out / TIMESERIES_FILE, timeseries_csv(run.timeseries, run.timeseries_apart)
        ),
        "report": write_atomic(out / REPORT_FILE, report_html(contract, run, baseline)),
        "markdown": write_atomic(out / MARKDOWN_FILE, summary_markdown(contract, REPORT_FILE)),
        "metrics": write_atomic(out / METRICS_FILE, openmetrics_text(contract)),
    }
    timelines = kept_timelines(run)
    if timelines is not None:
        slos = {name: block.slo for name, block in contract.scenarios.items()}
        page = timeline_html(timelines, run.meta, slos, contract.verdict)
        files["timeline"] = write_atomic(out / TIMELINE_FILE, page)
    return Outcome(contract.verdict, contract.exit_code, out, files, summary, comparison)


class NotResults(ValueError):
    """A folder whose saved data cannot be read: the user named the wrong folder
    (exit 2), unlike a failure to write its outputs (exit 3)."""


def rerender(out_dir: str | os.PathLike[str], tolerance: float = DEFAULT_TOLERANCE) -> Outcome:
    """Rebuild a results folder's outputs from its ``data/``. The baseline named in
    the run's metadata is compared again when its folder still exists; when it does
    not, the report says so instead of failing. Raises NotResults when the folder's
    data cannot be read, OSError when an output cannot be written."""
    try:
        run = RunData.load(out_dir)
    except (OSError, ValueError) as error:
        raise NotResults(str(error)) from error
    baseline_path = run.meta.get("baseline")
    if not baseline_path:
        return write_results(out_dir, run, tolerance=tolerance)
    try:
        baseline = RunData.load(baseline_path)
    except (OSError, ValueError) as exc:
        unread = f"baseline {baseline_path}: {exc}"
        return render_run(Path(out_dir), run, None, tolerance, baseline_error=unread)
    return write_results(out_dir, run, baseline, tolerance)
