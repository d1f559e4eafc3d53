"""Everything a run recorded, as saved in its results folder.

``analysis/`` and ``reports/`` are pure functions of this: a report is rebuilt
from ``data/`` alone, and two runs are compared exactly from their encoded
histograms. Layout under ``results/<run-id>/data/``:

- ``run.json``: metadata (run id, times, host, engine, model, tool version,
  completeness, load profile, generator health), the scenarios as run, the
  time-series rows (``timeseries``; each endpoint's and replica's apart, in
  ``timeseries_apart``) and the scraped server metrics;
- ``buckets.json``: per scenario and span (``all``, ``stage:<name>``,
  ``slice:<i>``, ``endpoint:<name>``, ``replica:<name>``) the encoded
  histograms and counters;
- ``timelines.json``: each request's timeline in a few numbers
  (``slogate.analysis.measurement.timelines``), for the diagnosis; absent in folders of
  older versions and of killed runs;
- ``journal.bin``: the same data appended as the run went
  (``slogate.analysis.documents.journal``), read only when the run's process was killed
  before its final save.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slogate.analysis.documents.file_sizes import MAX_DATA_BYTES, read_bounded
from slogate.analysis.documents.journal import JOURNAL_FILE, replay
from slogate.analysis.documents.versions import RUNDATA_SCHEMA
from slogate.analysis.measurement.recorder import ENDPOINT, OVERALL, REPLICA, Bucket
from slogate.analysis.measurement.timelines import Timelines

DATA_DIR = "data"
RUN_FILE = "run.json"
BUCKETS_FILE = "buckets.json"
TIMELINES_FILE = "timelines.json"
SCHEMA = RUNDATA_SCHEMA


@dataclass
class RunData:
    meta: dict[str, Any]
    buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)
    timeseries: list[dict[str, Any]] = field(default_factory=list)
    timeseries_apart: list[dict[str, Any]] = field(default_factory=list)
    server_metrics: list[dict[str, Any]] = field(default_factory=list)
    timelines: Timelines | None = None

    def scenario_names(self) -> list[str]:
        declared = list(self.meta.get("scenarios", {}))
        seen = sorted({s for s, _ in self.buckets} - set(declared))
        return declared + seen

    def overall(self, scenario: str) -> Bucket:
        return self.buckets.get((scenario, OVERALL)) or Bucket()

    def stages(self, scenario: str) -> dict[str, Bucket]:
        return self.spans(scenario, "stage:")

    def endpoints(self, scenario: str) -> dict[str, Bucket]:
        """The measured requests by the endpoint the client sent them to."""
        return self.spans(scenario, ENDPOINT)

    def replicas(self, scenario: str) -> dict[str, Bucket]:
        """The measured requests by the replica the server's header named."""
        return self.spans(scenario, REPLICA)

    def spans(self, scenario: str, prefix: str) -> dict[str, Bucket]:
        """The scenario's buckets whose span starts with ``prefix``, by the rest of it."""
        return {
            span[len(prefix) :]: b
            for (s, span), b in self.buckets.items()
            if s == scenario and span.startswith(prefix)
        }

    def slices(self, scenario: str) -> dict[int, Bucket]:
        """``--slice``: the scenario's buckets by slice index (0 from the run's start)."""
        return {int(index): b for index, b in self.spans(scenario, "slice:").items()}

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        data_dir = Path(out_dir) / DATA_DIR
        data_dir.mkdir(parents=True, exist_ok=True)
        run = {
            "schema": SCHEMA,
            "meta": self.meta,
            "timeseries": self.timeseries,
            "timeseries_apart": self.timeseries_apart,
            "server_metrics": self.server_metrics,
        }
        buckets = [[s, span, b.encode()] for (s, span), b in sorted(self.buckets.items())]
        write_json_atomic(data_dir / BUCKETS_FILE, buckets)
        if self.timelines is not None:
            write_json_atomic(data_dir / TIMELINES_FILE, self.timelines.encode(), indent=None)
        write_json_atomic(data_dir / RUN_FILE, run)
        return data_dir

    @classmethod
    def load(cls, out_dir: str | os.PathLike[str]) -> RunData:
        """The final save, else (the process was killed before it) the replayed
        journal, marked incomplete."""
        data_dir = Path(out_dir) / DATA_DIR
        run_path = data_dir / RUN_FILE
        journal_path = data_dir / JOURNAL_FILE
        if not run_path.is_file() and not journal_path.is_file():
            raise FileNotFoundError(
                f"{out_dir}: no {DATA_DIR}/{RUN_FILE}: not a slogate results folder"
            )
        from slogate.analysis.documents.contracts import (  # pydantic: not in load processes
            RunFile,
            parse,
        )

        if run_path.is_file():
            run = parse(RunFile, _read_json(run_path), str(run_path))
            buckets = _read_buckets(data_dir / BUCKETS_FILE)
            timelines = _read_timelines(data_dir / TIMELINES_FILE)
        else:
            replayed = replay(journal_path)
            run = parse(RunFile, replayed.document, str(journal_path))
            buckets = replayed.buckets
            timelines = None
        return cls(
            meta=run.meta.model_dump(exclude_unset=True),
            buckets=buckets,
            timeseries=run.timeseries,
            timeseries_apart=run.timeseries_apart,
            server_metrics=run.server_metrics,
            timelines=timelines,
        )


def forget_final_save(out_dir: str | os.PathLike[str]) -> None:
    """Remove the final save of an earlier run in a reused folder: a run killed
    there is then judged from its own journal, not from the earlier run."""
    data_dir = Path(out_dir) / DATA_DIR
    for name in (RUN_FILE, BUCKETS_FILE, TIMELINES_FILE):
        (data_dir / name).unlink(missing_ok=True)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_bounded(path, MAX_DATA_BYTES).decode("utf-8"))
    except (UnicodeDecodeError, RecursionError) as error:
        raise ValueError(f"{path}: not readable JSON ({error})") from error
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from error


def _read_buckets(path: Path) -> dict[tuple[str, str], Bucket]:
    """The saved buckets; ValueError naming the file for any other shape."""
    rows = _read_json(path)
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and len(row) == 3 and all(isinstance(x, str) for x in row[:2])
        for row in rows
    ):
        raise ValueError(f"{path}: expected a list of [scenario, span, histograms] rows")
    buckets = {}
    for scenario, span, data in rows:
        try:
            buckets[(scenario, span)] = Bucket.decode(data)
        except Exception as error:  # any malformed encoding, whatever the decoder raises
            raise ValueError(
                f"{path}: bucket {scenario}/{span} does not decode: {error}"
            ) from error
    return buckets


def _read_timelines(path: Path) -> Timelines | None:
    """The saved timelines, None when the folder has none; ValueError naming
    the file for any other shape."""
    if not path.is_file():
        return None
    data = _read_json(path)
    try:
        return Timelines.decode(data)
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise ValueError(f"{path}: not slogate timelines: {error!r}") from error


def write_json_atomic(path: Path, data: Any, indent: int | None = 1) -> None:
    """Write then rename, so an interrupted run never leaves half a file; a write
    that fails (disk full) leaves no ``.tmp`` behind either."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=indent, sort_keys=False, default=str))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
