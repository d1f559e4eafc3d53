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
MARKER = b'<meta name="generator" content="slogate-index">'
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
    """Runs with a readable summary, oldest first, and the folders without one
    (not JSON, or not shaped as the page reads it)."""
    runs, unreadable = [], []
    for path in sorted(p for p in root.iterdir() if (p / SUMMARY_FILE).is_file()):
        try:
            summary = json.loads((path / SUMMARY_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            unreadable.append(path.name)
            continue
        if readable(summary):
            runs.append(RunEntry(path.name, summary))
        else:
            unreadable.append(path.name)
    runs.sort(key=lambda r: (r.started, r.folder))
    return runs, unreadable


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def readable(summary: Any) -> bool:
    """Whether every field the page reads has the type it needs (a summary
    edited by hand, or from another tool, must not break the whole page)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("scenarios"), dict):
        return False
    run = summary.get("run", {})
    if not isinstance(run, dict) or not isinstance(run.get("started_at") or "", str):
        return False
    if not isinstance(summary.get("verdict", ""), str):
        return False
    worst = summary.get("worst_slo")
    if worst is not None and not (
        isinstance(worst, dict)
        and all(isinstance(worst.get(k), str) for k in ("scenario", "metric", "stat"))
        and all(_number(worst.get(k)) or worst.get(k) is None for k in ("value", "margin_pct"))
    ):
        return False
    return all(isinstance(block, dict) for block in summary["scenarios"].values())


def stat_of(entry: RunEntry, scenario: str, metric: str, stat: str) -> float | None:
    """One number of a run's summary; None when absent or not a number."""
    block = entry.summary["scenarios"].get(scenario)
    if metric == "requests_per_s":
        value = _get(_get(block, "throughput"), metric)
    else:
        value = _get(_get(_get(block, "metrics"), metric), stat)
    return value if _number(value) else None


def _get(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


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


def ours(path: Path) -> bool:
    """Whether ``path`` is absent or an index this module wrote: any other
    ``index.html`` (a site's, a user's) is never overwritten."""
    try:
        with path.open("rb") as file:
            return MARKER in file.read(4096)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def write_index(results_root: str | os.PathLike[str]) -> Path | None:
    """Write ``index.html`` listing the runs under ``results_root``; None (and
    nothing written) when an ``index.html`` that is not ours is there."""
    root = Path(results_root)
    if not ours(root / INDEX_FILE):
        return None
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
