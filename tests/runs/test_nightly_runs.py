"""Nightly runs as CI runs them: real `slogate run`s against the exact-schedule
server with ``--baseline auto``, the job summary, the Pushgateway, ``slogate prune``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gateway import gateway
from loadruns import ROOT, scenario_file, summary

from slogate.engines.exact import ExactEngine

pytestmark = pytest.mark.slow


def nightly(
    engine_ttft_ms: float, scenario: Path, out: Path, *extra: str, env: dict[str, str]
) -> subprocess.CompletedProcess:
    """One run of a fresh engine (a new port each night, as in CI) with --baseline auto."""
    # 80 ms between tokens and 100 ms to the first: a busy machine's few ms of
    # scheduling noise (the engine's late sends, which no generator bound
    # covers) stay inside the 10% tolerance, 8 ms; three tokens a request give
    # a few hundred requests, enough to close the p99 intervals.
    with ExactEngine({"ttft_ms": engine_ttft_ms, "itl_ms": 80}) as engine:
        return subprocess.run(
            [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--host", engine.url,
             "--users", "16", "--duration", "8s", "--out", str(out), "--baseline", "auto", *extra],
            capture_output=True, text=True, timeout=180, cwd=ROOT, env={**os.environ, **env},
        )  # fmt: skip


def test_a_planted_regression_fails_the_nightly_gate_against_the_run_before(tmp_path: Path) -> None:
    root, step = tmp_path / "results", tmp_path / "step-summary.md"
    scenario = scenario_file(tmp_path, "exact-chat", workload={"output_tokens": 3})
    env = {"GITHUB_STEP_SUMMARY": str(step)}
    first = nightly(100, scenario, root / "night-1", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "no earlier run of this scenario" in first.stderr
    assert "baseline" not in summary(root / "night-1")
    second = nightly(100, scenario, root / "night-2", env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert summary(root / "night-2")["baseline"]["base_run"] == "night-1"
    with gateway() as pushes:
        third = nightly(120, scenario, root / "night-3", "--push-metrics", pushes.url, env=env)
    assert third.returncode == 1, third.stderr[-3000:]
    assert f"against baseline {root / 'night-2'}" in third.stderr
    s = summary(root / "night-3")
    assert s["verdict"] == "pass" and s["exit_code"] == 1
    assert s["baseline"]["base_run"] == "night-2"
    regressed = {(d["metric"], d["stat"]) for d in s["baseline"]["deltas"] if d["regression"]}
    assert ("ttft_ms", "p95") in regressed or ("ttft_ms", "p99") in regressed
    assert all(metric.startswith(("ttft", "e2e")) for metric, _ in regressed)
    markdown = (root / "night-3" / "summary.md").read_text()
    assert "Against baseline **night-2**: regression" in markdown
    assert markdown in step.read_text()
    headings = [line for line in step.read_text().splitlines() if line.startswith("## ")]
    assert len(headings) == 3, headings  # one per night; a diagnosis's "### Why" is not one
    [(method, path, body)] = pushes.received
    assert method == "PUT" and path == "/metrics/job/slogate/instance/exact-chat"
    assert b"slogate_regressions{" in body
    page = (root / "index.html").read_text()  # rewritten by each run
    flagged = re.findall(r'<tr class="regression"[^>]*>\s*<td class="nw"><a href="([^"/]+)/', page)
    assert flagged == ["night-3"]


def test_prune_keeps_the_newest_runs_and_rewrites_the_index(tmp_path: Path) -> None:
    from reportdata import realistic_run

    from slogate.reports import write_results

    for night in range(5):
        run = realistic_run(n=300, seed=night)
        run.meta["run_id"] = f"night-{night}"
        run.meta["started_at"] = f"2026-01-0{night + 1}T00:00:00+00:00"
        write_results(tmp_path / f"night-{night}", run)
    (tmp_path / "notes").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "slogate.cli", "prune", str(tmp_path), "--keep", "2"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "index.html",
        "night-3",
        "night-4",
        "notes",
    ]
    page = (tmp_path / "index.html").read_text()
    assert "night-4" in page and "night-0" not in page
    bad = subprocess.run(
        [sys.executable, "-m", "slogate.cli", "prune", str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "--keep N, --older-than AGE" in bad.stderr
