"""The runs of a results root, read from their ``summary.json``: which is the baseline
of a new run (``--baseline auto``), and which to drop (``slogate prune``).

A run is identified by its folder; runs are ordered by their start time (then
folder name). The baseline of a run is the newest earlier run of the same
scenarios against the same target (the engine's kind and model, as ``/v1/models``
names them; not the URL, whose port changes from run to run) that finished and was not
invalid, and that still has its ``data/`` to compare exactly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

SUMMARY_FILE = "summary.json"
DATA_DIR = "data"


@dataclass(frozen=True)
class PastRun:
    folder: Path
    summary: dict[str, Any]

    @property
    def started(self) -> str:
        return (self.summary.get("run") or {}).get("started_at") or ""

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(sorted(self.summary.get("scenarios") or {}))

    @property
    def target(self) -> tuple[str, str]:
        engine = (self.summary.get("run") or {}).get("engine") or {}
        return str(engine.get("owned_by") or ""), str(engine.get("model") or "")

    @property
    def usable_as_baseline(self) -> bool:
        run = self.summary.get("run") or {}
        complete = run.get("complete", True)
        return complete and self.summary.get("verdict") != "invalid"


def read_runs(root: Path) -> list[PastRun]:
    """Every folder directly under ``root`` with a readable summary, oldest first."""
    runs = []
    if not root.is_dir():
        return runs
    for path in root.iterdir():
        try:
            summary = json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(summary, dict) and isinstance(summary.get("scenarios"), dict):
            runs.append(PastRun(path, summary))
    runs.sort(key=lambda r: (r.started, r.folder.name))
    return runs


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
        groups: dict[tuple, list[PastRun]] = {}
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
