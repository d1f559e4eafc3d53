"""``results/index.html``: every run in a results folder, newest first, with trends.

Built from each run's ``summary.json`` alone (no histograms), so it stays fast
with hundreds of runs. A folder whose summary cannot be read is listed as such
rather than breaking the page.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from slogate.reports.html import render
from slogate.reports.results import REPORT_FILE, SUMMARY_FILE, write_atomic
from slogate.reports.svg import sparkline

INDEX_FILE = "index.html"
TREND_RUNS = 50
TRENDS = (
    ("ttft_ms", "p99"),
    ("itl_ms", "p99"),
    ("tpot_ms", "p99"),
    ("e2e_ms", "p99"),
)


@dataclass(frozen=True)
class RunEntry:
    folder: str
    summary: dict[str, Any]

    @property
    def link(self) -> str:
        return f"{quote(self.folder)}/{REPORT_FILE}"

    @property
    def started(self) -> str:
        return self.summary.get("run", {}).get("started_at") or ""


def find_runs(root: Path) -> tuple[list[RunEntry], list[str]]:
    """Runs with a readable summary, oldest first, and the folders without one."""
    runs, unreadable = [], []
    for path in sorted(p for p in root.iterdir() if (p / SUMMARY_FILE).is_file()):
        try:
            summary = json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            unreadable.append(path.name)
            continue
        if isinstance(summary, dict) and isinstance(summary.get("scenarios"), dict):
            runs.append(RunEntry(path.name, summary))
        else:
            unreadable.append(path.name)
    runs.sort(key=lambda r: (r.started, r.folder))
    return runs, unreadable


def stat_of(entry: RunEntry, scenario: str, metric: str, stat: str) -> float | None:
    block = entry.summary["scenarios"].get(scenario) or {}
    if metric == "requests_per_s":
        return (block.get("throughput") or {}).get(metric)
    return ((block.get("metrics") or {}).get(metric) or {}).get(stat)


def trends(runs: list[RunEntry]) -> list[dict[str, Any]]:
    """One sparkline per scenario and metric over the latest runs."""
    recent = runs[-TREND_RUNS:]
    scenarios = sorted({name for r in recent for name in r.summary["scenarios"]})
    rows = []
    for scenario in scenarios:
        for metric, stat in (*TRENDS, ("requests_per_s", "")):
            values = [stat_of(r, scenario, metric, stat) for r in recent]
            known = [v for v in values if v is not None]
            if known:
                rows.append(
                    {
                        "scenario": scenario,
                        "metric": f"{metric} {stat}".strip(),
                        "spark": sparkline(values),
                        "latest": values[-1],
                        "low": min(known),
                        "high": max(known),
                    }
                )
    return rows


def write_index(results_root: str | os.PathLike[str]) -> Path:
    """Write ``index.html`` listing the runs under ``results_root``."""
    root = Path(results_root)
    runs, unreadable = find_runs(root)
    page = render(
        "index.html.j2",
        runs=list(reversed(runs)),
        trends=trends(runs),
        unreadable=unreadable,
        trend_runs=TREND_RUNS,
        columns=[*TRENDS, ("requests_per_s", "")],
        stat_of=stat_of,
    )
    return write_atomic(root / INDEX_FILE, page)
