"""The runs of a results root, read from their ``summary.json``: which is the baseline
of a new run (``--baseline auto``), and which to drop (``slogate prune``).

A run is identified by its folder; runs are ordered by their start time (then
folder name). The baseline of a run is the newest earlier run of the same
scenarios against the same target (the engine's kind and model, as ``/v1/models``
names them; not the URL, whose port changes from run to run) that finished and was not
invalid, and that still has its ``data/`` to compare exactly.

The history's regressions between consecutive runs use the rule of
``slogate compare`` (:func:`slogate.analysis.verdict.compare.classify`: beyond the
tolerance, confidence intervals apart and beyond the two runs' generator error
bounds, at a gated percentile of a latency metric) on the percentiles,
intervals and bounds each summary holds, so the dashboard needs no histograms.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from slogate.analysis.documents.file_sizes import MAX_DOCUMENT_BYTES, read_bounded
from slogate.analysis.documents.versions import REPEATS_SCHEMA
from slogate.analysis.measurement.percentiles import Estimate
from slogate.analysis.verdict.compare import (
    DEFAULT_TOLERANCE,
    GATED,
    LATENCY_METRICS,
    WORSE,
    classify,
    summed_bounds,
)
from slogate.scenarios.metrics import TTFT

if TYPE_CHECKING:
    from slogate.analysis.documents.contracts import Summary

SUMMARY_FILE = "summary.json"
RESULTS_ROOT = Path("results")
DATA_DIR = "data"


def results_folder(name: str, given: str | os.PathLike[str] | None = None) -> Path:
    """Where a run, sweep or experiment writes: ``given`` when the user named
    one, else ``results/<YYYYmmdd-HHMMSS>-<name>``, which sorts by time."""
    if given:
        return Path(given)
    return RESULTS_ROOT / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{name}"


def unwritable(folder: Path) -> str | None:
    """Why ``folder`` cannot take a run's results (None when it can), made
    with its ``data/`` and checked by writing a file in each: a folder on a
    read-only file system, or one this user may not write, passes a mkdir but
    would be found only when the journal or the report is written, after the
    load (docs/reliability.md)."""
    try:
        (folder / DATA_DIR).mkdir(parents=True, exist_ok=True)
        for where in (folder, folder / DATA_DIR):
            with tempfile.TemporaryFile(dir=where, prefix=".slogate-write-check-"):
                pass
    except OSError as error:
        return f"--out {folder}: cannot write the results folder: {error.strerror or error}"
    return None


@dataclass(frozen=True)
class PastRun:
    folder: Path
    summary: Summary

    @property
    def started(self) -> str:
        return self.summary.run.started_at or ""

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(sorted(self.summary.scenarios))

    @property
    def target(self) -> tuple[str, str]:
        engine = self.summary.run.engine or {}
        return str(engine.get("owned_by") or ""), str(engine.get("model") or "")

    @property
    def usable_as_baseline(self) -> bool:
        complete = self.summary.run.complete is not False
        return complete and self.summary.verdict != "invalid"


def read_runs(root: Path, unreadable: list[str] | None = None) -> list[PastRun]:
    """Every folder directly under ``root`` with a readable summary, oldest first;
    the names of folders whose summary.json cannot be read go into ``unreadable``."""
    from slogate.analysis.documents.contracts import (  # not in load processes
        ContractError,
        Summary,
        read_document,
    )

    runs: list[PastRun] = []
    if not root.is_dir():
        return runs
    for path in root.iterdir():
        file = path / SUMMARY_FILE
        if not file.is_file():
            continue
        try:
            runs.append(PastRun(path, read_document(Summary, file)))
        except (OSError, ContractError):
            if unreadable is not None and not repeat_set(file):
                unreadable.append(path.name)
    runs.sort(key=lambda r: (r.started, r.folder.name))
    return runs


def repeat_set(file: Path) -> bool:
    """Whether ``file`` is a repeat set's summary (``slogate run --repeat``): not a
    run, so neither a baseline nor unreadable; its runs are in its folder."""
    try:
        schema: object = orjson.loads(read_bounded(file, MAX_DOCUMENT_BYTES)).get("schema")
        return schema == REPEATS_SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def auto_baseline(
    root: Path, scenarios: Sequence[str], engine: str, model: str, exclude: Path | None = None
) -> Path | None:
    """The folder of the newest run under ``root`` of the same scenarios and target
    (``engine`` is the ``owned_by`` the engine reports), or None when there is none
    yet (a first nightly run has nothing to compare with)."""
    wanted = (tuple(sorted(scenarios)), (engine, model))
    skip = exclude.resolve() if exclude is not None else None
    for run in reversed(read_runs(root)):
        if skip is not None and run.folder.resolve() == skip:
            continue
        same = (run.scenarios, run.target) == wanted
        if same and run.usable_as_baseline and (run.folder / DATA_DIR).is_dir():
            return run.folder
    return None


def started_at(run: PastRun) -> datetime | None:
    try:
        moment = datetime.fromisoformat(run.started)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def runs_to_prune(
    runs: Sequence[PastRun],
    keep: int | None,
    older_than: timedelta | None,
    now: datetime,
) -> list[PastRun]:
    """The runs that ``slogate prune`` removes: all but the newest ``keep`` of each
    scenario set and target, and those started more than ``older_than`` before ``now``.
    A run whose start time cannot be read is never removed by age."""
    doomed: dict[Path, PastRun] = {}
    if keep is not None:
        groups: dict[tuple[tuple[str, ...], tuple[str, str]], list[PastRun]] = {}
        for run in runs:
            groups.setdefault((run.scenarios, run.target), []).append(run)
        for group in groups.values():
            doomed |= {r.folder: r for r in group[: max(len(group) - keep, 0)]}
    if older_than is not None:
        for run in runs:
            moment = started_at(run)
            if moment is not None and now - moment > older_than:
                doomed[run.folder] = run
    return [r for r in runs if r.folder in doomed]


def estimate_of(run: PastRun, scenario: str, metric: str, stat: str) -> Estimate | None:
    """A percentile of a latency metric (ms) with its interval, from the summary."""
    block = run.summary.scenarios.get(scenario)
    stats = None if block is None else block.metrics.get(metric)
    value = None if stats is None else getattr(stats, stat, None)
    if stats is None or value is None or not stats.count:
        return None
    lower, upper = stats.ci.get(stat) or (None, None)
    return Estimate(value=value, lower=lower, upper=upper, count=stats.count)


@dataclass(frozen=True)
class Regression:
    scenario: str
    metric: str
    stat: str
    base: Estimate
    new: Estimate
    base_folder: str

    @property
    def change_pct(self) -> float | None:
        return None if not self.base.value else 100.0 * (self.new.value / self.base.value - 1)


def regressions_between(
    base: PastRun, new: PastRun, scenario: str, tolerance: float = DEFAULT_TOLERANCE
) -> list[Regression]:
    """The gated latency percentiles of ``scenario`` that got worse from ``base`` to ``new``."""
    found = []
    for name in LATENCY_METRICS:
        metric = f"{name}_ms"
        for stat in GATED:
            b, n = (
                estimate_of(base, scenario, metric, stat),
                estimate_of(new, scenario, metric, stat),
            )
            if b is None or n is None:
                continue
            error = summed_bounds(generator_bound(run, stat) for run in (base, new))
            if classify(b, n, tolerance, generator_error=error) == WORSE:
                found.append(Regression(scenario, metric, stat, b, n, base.folder.name))
    return found


def generator_bound(run: PastRun, stat: str) -> float | None:
    """The run's load generator's error bound on a latency percentile (ms), as
    its summary holds it (the same for every latency metric)."""
    bounds = run.summary.generator.error_bound_ms or {}
    return (bounds.get(TTFT.key) or {}).get(stat)


def series_key(run: PastRun, scenario: str) -> tuple[str, str, str]:
    """One trend line: a scenario against one engine and model."""
    return (scenario, *run.target)


def trend_series(runs: Sequence[PastRun]) -> dict[tuple[str, str, str], list[PastRun]]:
    """The runs of each scenario and target, oldest first (``runs`` sorted so)."""
    series: dict[tuple[str, str, str], list[PastRun]] = {}
    for run in runs:
        for scenario in run.summary.scenarios:
            series.setdefault(series_key(run, scenario), []).append(run)
    return series


def trend_regressions(
    series: dict[tuple[str, str, str], list[PastRun]], tolerance: float = DEFAULT_TOLERANCE
) -> dict[tuple[str, str], list[Regression]]:
    """Per (run folder, scenario): its regressions against the run before it in the
    same series. Invalid or incomplete runs are skipped as bases, as by ``--baseline auto``."""
    flagged: dict[tuple[str, str], list[Regression]] = {}
    for (scenario, _, _), runs in series.items():
        previous: PastRun | None = None
        for run in runs:
            if previous is not None:
                found = regressions_between(previous, run, scenario, tolerance)
                if found:
                    flagged[(run.folder.name, scenario)] = found
            if run.usable_as_baseline:
                previous = run
    return flagged
