"""``slogate export``: a run's, sweep's or tune's folder written again in another tool's format.

What a folder is, is read from the document it holds (a run's ``summary.json``,
``sweep.json``, ``tune.json``), so one command exports any of them. A report
per load point: a run's scenarios, each point of a sweep, each point of each
measured treatment's search in a tune. The CSVs are the files a run, sweep or
tune writes itself, rebuilt from its documents, for a folder copied without them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from slogate.analysis.documents.rundata import RunData
from slogate.reports.llmd_report import LoadPoint, write_report
from slogate.reports.results import SUMMARY_FILE, NotResults, write_atomic
from slogate.reports.tables import percentiles_csv, timeseries_csv

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import ScenarioSummary, Summary, Sweep, SweepPoint

FORMATS = ("llm-d-report", "csv")
SWEEP_FILE = "sweep.json"
TUNE_FILE = "tune.json"
LLMD_FOLDER = "llm-d-report"
TREATMENTS_FILE = "treatments.csv"
RUN_DATA = "data/run.json"


def safe_name(text: str) -> str:
    """``text`` as one file name inside the export's folder: a document edited by
    hand cannot name ``..`` or a path."""
    name = re.sub(r"[^A-Za-z0-9._=,+-]", "_", text)
    return name if name.strip(".") else "_"


def not_results(folder: Path) -> NotResults:
    return NotResults(
        f"{folder}: not a run, sweep or tune folder (no {SUMMARY_FILE}, {SWEEP_FILE} "
        f"or {TUNE_FILE})"
    )


def run_points(summary: Summary) -> Iterator[tuple[str, LoadPoint]]:
    """Each scenario of a run as a load point, with the file name of its report.
    A point's key is what the run was (not where its folder lies), so a copy of
    the folder exports the same ``uid``s."""
    key = f"slogate-run/{summary.run.run_id}/{summary.run.started_at}"
    for name, block in summary.scenarios.items():
        yield safe_name(name) + ".json", scenario_point(block, f"{key}/{name}", summary, name)


def scenario_point(block: ScenarioSummary, key: str, summary: Summary, name: str) -> LoadPoint:
    run, load = summary.run, block.load
    return LoadPoint(
        key=key,
        description=f"slogate run of scenario {name}",
        requests=block.requests,
        metrics=block.metrics,
        throughput=block.throughput,
        lengths=block.tokens.per_request,
        config=block.config,
        rate=load.get("rate"),
        users=None if load.get("rate") else load.get("users"),
        started_at=run.started_at,
        ended_at=run.ended_at,
        tool_version=run.tool_version or "unknown",
        engine=run.engine or {},
    )


def sweep_points(sweep: Sweep, folder: Path, study: str = "") -> Iterator[tuple[str, LoadPoint]]:
    """Each point of a sweep (its trials' histograms pooled, as the sweep judged it);
    ``study`` names the tune it is part of."""
    key = f"{study}slogate-sweep/{sweep.scenario}/{sweep.created_at}"
    for index, point in enumerate(sweep.points, start=1):
        label = point.label or ("" if point.x is None else f"{point.x:g}") or str(index)
        yield (
            safe_name(f"{index:02d}-{sweep.mode}-{label}") + ".json",
            sweep_point(sweep, point, index, key, folder),
        )


def first_summary(point: SweepPoint, folder: Path) -> Summary | None:
    """The summary of the point's first trial, for the run's times, tool and engine."""
    from slogate.analysis.documents.contracts import ContractError, Summary, read_document

    for run in point.runs:
        try:
            return read_document(Summary, folder / run.dir / SUMMARY_FILE)
        except (ContractError, OSError):
            continue
    return None


def sweep_point(sweep: Sweep, point: SweepPoint, index: int, key: str, folder: Path) -> LoadPoint:
    blocks = [run.scenario for run in point.runs if run.scenario is not None]
    one = blocks[0] if len(blocks) == 1 else None
    summary = first_summary(point, folder)
    run = None if summary is None else summary.run
    x = point.x
    return LoadPoint(
        key=f"{key}/{index}",
        description=f"slogate sweep of {Path(sweep.scenario).name}, point {index}"
        + ("" if x is None else f" at {x:g} {sweep.unit}"),
        requests=point.requests,
        metrics=point.metrics,
        throughput=point.throughput,
        lengths={} if one is None else one.tokens.per_request,
        config=blocks[0].config if blocks else {},
        rate=x if sweep.mode == "rate" else None,
        users=x if sweep.mode == "users" else None,
        stage=index - 1,
        study=key,
        started_at=None if run is None else run.started_at,
        ended_at=None if run is None else run.ended_at,
        tool_version=(run and run.tool_version) or "unknown",
        engine=(run and run.engine) or {},
    )


def tune_points(folder: Path) -> Iterator[tuple[str, LoadPoint]]:
    """Each point of each treatment's full search, in a folder per treatment."""
    from slogate.analysis.documents.contracts import Sweep, Tune, read_document

    tune = read_document(Tune, folder / TUNE_FILE)
    key = f"slogate-tune/{tune.scenario}/{tune.started_at}/"
    for treatment in tune.treatments:
        if treatment.sweep is None or not (folder / treatment.sweep / SWEEP_FILE).is_file():
            continue
        sweep_dir = folder / treatment.sweep
        sweep = read_document(Sweep, sweep_dir / SWEEP_FILE)
        name = safe_name(Path(treatment.sweep).parent.name or treatment.name)
        for file, point in sweep_points(sweep, sweep_dir, f"{key}{treatment.name}/"):
            yield f"{name}/{file}", point


def load_points(folder: Path) -> Iterator[tuple[str, LoadPoint]]:
    """The load points of a run, sweep or tune folder; NotResults when it is none."""
    from slogate.analysis.documents.contracts import (
        ContractError,
        Summary,
        Sweep,
        read_document,
    )

    try:
        if (folder / TUNE_FILE).is_file():
            yield from tune_points(folder)
        elif (folder / SWEEP_FILE).is_file():
            yield from sweep_points(read_document(Sweep, folder / SWEEP_FILE), folder)
        elif (folder / SUMMARY_FILE).is_file():
            yield from run_points(read_document(Summary, folder / SUMMARY_FILE))
        else:
            raise not_results(folder)
    except ContractError as error:
        raise NotResults(str(error)) from None


def export_llmd(folder: Path, out: Path | None) -> list[Path]:
    """One llm-d report per load point, under ``out`` (default FOLDER/llm-d-report)."""
    target = out if out is not None else folder / LLMD_FOLDER
    points = list(load_points(folder))
    if not points:
        raise NotResults(f"{folder}: no load point measured, nothing to export")
    written = []
    for file, point in points:
        path = target / file
        path.parent.mkdir(parents=True, exist_ok=True)
        written.append(write_report(path, point))
    return written


def export_csv(folder: Path, out: Path | None) -> list[Path]:
    """The folder's own CSVs, rebuilt from its documents into ``out`` (default FOLDER)."""
    from slogate.analysis.documents.contracts import (
        ContractError,
        Summary,
        Sweep,
        Tune,
        read_document,
    )
    from slogate.reports.experiments import write_csvs
    from slogate.reports.results import PERCENTILES_FILE, TIMESERIES_FILE
    from slogate.reports.tune import treatments_csv

    target = out if out is not None else folder
    target.mkdir(parents=True, exist_ok=True)
    try:
        if (folder / TUNE_FILE).is_file():
            tune = read_document(Tune, folder / TUNE_FILE)
            return [write_atomic(target / TREATMENTS_FILE, treatments_csv(tune))]
        if (folder / SWEEP_FILE).is_file():
            sweep = read_document(Sweep, folder / SWEEP_FILE)
            return list(write_csvs(target, sweep.points).values())
        if (folder / SUMMARY_FILE).is_file():
            summary = read_document(Summary, folder / SUMMARY_FILE)
            files = [write_atomic(target / PERCENTILES_FILE, percentiles_csv(summary))]
            if (folder / RUN_DATA).is_file():
                run = RunData.load(folder)
                series = timeseries_csv(run.timeseries, run.timeseries_apart)
                files.append(write_atomic(target / TIMESERIES_FILE, series))
            return files
    except (ContractError, ValueError) as error:
        raise NotResults(str(error)) from None
    raise not_results(folder)


def export(folder: Path, fmt: str, out: Path | None) -> list[Path]:
    """Write ``folder`` in ``fmt``; the files written. NotResults: not a results folder."""
    if not folder.is_dir():
        raise NotResults(f"{folder}: not a folder")
    if fmt == "csv":
        return export_csv(folder, out)
    return export_llmd(folder, out)
