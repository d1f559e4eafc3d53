"""Everything a run recorded, as saved in its results folder.

``analysis/`` and ``reports/`` are pure functions of this: a report is rebuilt
from ``data/`` alone, and two runs are compared exactly from their encoded
histograms. Layout under ``results/<run-id>/data/``:

- ``run.json``: metadata (run id, times, host, engine, model, tool version,
  completeness, load profile, generator health), the scenarios as run, the
  time-series rows and the scraped server metrics;
- ``buckets.json``: per scenario and span (``all``, ``stage:<name>``) the
  encoded histograms and counters.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slogate.analysis.recorder import OVERALL, Bucket

DATA_DIR = "data"
RUN_FILE = "run.json"
BUCKETS_FILE = "buckets.json"
SCHEMA = "slogate.rundata/1"


@dataclass
class RunData:
    meta: dict[str, Any]
    buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)
    timeseries: list[dict[str, Any]] = field(default_factory=list)
    server_metrics: list[dict[str, Any]] = field(default_factory=list)

    def scenario_names(self) -> list[str]:
        declared = list(self.meta.get("scenarios", {}))
        seen = sorted({s for s, _ in self.buckets} - set(declared))
        return declared + seen

    def overall(self, scenario: str) -> Bucket:
        return self.buckets.get((scenario, OVERALL)) or Bucket()

    def stages(self, scenario: str) -> dict[str, Bucket]:
        prefix = "stage:"
        return {
            span[len(prefix) :]: b
            for (s, span), b in self.buckets.items()
            if s == scenario and span.startswith(prefix)
        }

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        data_dir = Path(out_dir) / DATA_DIR
        data_dir.mkdir(parents=True, exist_ok=True)
        run = {
            "schema": SCHEMA,
            "meta": self.meta,
            "timeseries": self.timeseries,
            "server_metrics": self.server_metrics,
        }
        buckets = [[s, span, b.encode()] for (s, span), b in sorted(self.buckets.items())]
        write_json_atomic(data_dir / BUCKETS_FILE, buckets)
        write_json_atomic(data_dir / RUN_FILE, run)
        return data_dir

    @classmethod
    def load(cls, out_dir: str | os.PathLike[str]) -> RunData:
        data_dir = Path(out_dir) / DATA_DIR
        run_path = data_dir / RUN_FILE
        if not run_path.is_file():
            raise FileNotFoundError(
                f"{out_dir}: no {DATA_DIR}/{RUN_FILE}: not a slogate results folder"
            )
        run = json.loads(run_path.read_text())
        if run.get("schema") != SCHEMA:
            raise ValueError(f"{run_path}: schema {run.get('schema')!r}, expected {SCHEMA!r}")
        buckets = {
            (s, span): Bucket.decode(data)
            for s, span, data in json.loads((data_dir / BUCKETS_FILE).read_text())
        }
        return cls(
            meta=run["meta"],
            buckets=buckets,
            timeseries=run.get("timeseries", []),
            server_metrics=run.get("server_metrics", []),
        )


def write_json_atomic(path: Path, data: Any) -> None:
    """Write then rename, so an interrupted run never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False, default=str))
    os.replace(tmp, path)
