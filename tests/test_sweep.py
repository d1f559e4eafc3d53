"""Sweeps: the limiting SLO, the knee, the report; --find-max end to end on the simulated engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slogate.analysis.contracts import SUMMARY_SCHEMA, Summary
from slogate.analysis.diagnosis import diagnose
from slogate.analysis.rundata import RunData
from slogate.reports.experiments import write_sweep
from slogate.sweep import knee_metric, knee_of, limiting_of, longer_duration
from slogate.trials import TrialResult

TTFT_P99 = {"metric": "ttft_ms", "stat": "p99", "threshold": 500.0, "kind": "max"}
TPOT_P95 = {"metric": "tpot_ms", "stat": "p95", "threshold": 50.0, "kind": "max"}


def summary(verdict: str, slo: list[dict], reasons: tuple[str, ...] = ()) -> Summary:
    """A trial's summary holding only what the sweep reads, parsed like a real one."""
    block = {"verdict": verdict, "requests": {"ok": 0, "failed": 0, "total": 0},
             "tokens": {"input": 0, "output": 0}, "metrics": {}, "throughput": {},
             "slo": slo}  # fmt: skip
    return Summary.model_validate(
        {"schema": SUMMARY_SCHEMA, "verdict": verdict, "exit_code": 0,
         "invalid_reasons": list(reasons), "scenarios": {"chat": block}}
    )  # fmt: skip


def slo_entry(base: dict, value: float, verdict: str, margin_pct: float) -> dict:
    name = f"{base['metric']} {base['stat']} <= {base['threshold']:g}"
    return {**base, "name": name, "value": value, "verdict": verdict, "margin_pct": margin_pct}


def test_limiting_slo_names_the_deepest_failure_with_its_value(tmp_path):
    result = TrialResult(
        tmp_path,
        1,
        summary(
            "fail",
            [
                slo_entry(TTFT_P99, 900.0, "fail", -80.0),
                slo_entry(TPOT_P95, 55.0, "fail", -10.0),
            ],
        ),
    )
    assert limiting_of(result) == "chat: ttft_ms p99 <= 500 (measured 900)"


def test_limiting_of_invalid_and_missing_runs(tmp_path):
    invalid = TrialResult(tmp_path, 3, summary("invalid", [], ("generator lag p99 90 ms",)))
    assert limiting_of(invalid) == "invalid run: generator lag p99 90 ms"
    assert limiting_of(TrialResult(tmp_path, 3, None)) == "no results (exit code 3)"


def point(x: float, ttft_p99: float, tps: float) -> dict:
    metrics = {
        "ttft_ms": {"mean": ttft_p99 / 2, "p95": ttft_p99 * 0.9, "p99": ttft_p99},
        "tpot_ms": {"mean": 10.0, "p95": 11.0, "p99": 12.0},
        "e2e_ms": {"mean": 900.0, "p99": 1000.0},
    }
    return {
        "label": f"{x:g}",
        "x": x,
        "runs": [{"dir": f"runs/{x:g}", "verdict": "pass", "exit_code": 0, "scenario": None}],
        "requests": {"ok": 10, "failed": 0},
        "metrics": metrics,
        "throughput": {"requests_per_s": x, "output_tokens_per_s": tps},
        "cost": None,
    }


POINTS = [point(1, 100, 100), point(2, 104, 200), point(4, 110, 390), point(8, 2500, 420)]


def test_knee_on_the_limiting_slo_curve():
    slos = [TTFT_P99, TPOT_P95]
    assert knee_metric(slos, TPOT_P95) == {"metric": "tpot_ms", "stat": "p95"}
    assert knee_metric(slos, None) == {"metric": "ttft_ms", "stat": "p99"}
    assert knee_metric([], None) == {"metric": "ttft_ms", "stat": "p99"}
    knee = knee_of(POINTS, "ttft_ms", "p99")
    assert knee == {"x": 4, "y": 110, "metric": "ttft_ms", "stat": "p99"}


def test_sweep_report_draws_each_slo_against_throughput_and_load(tmp_path):
    doc = {
        "mode": "rate",
        "unit": "requests/s",
        "scenario": "chat.yaml",
        "created_at": "now",
        "slo": [TTFT_P99],
        "points": POINTS,
        "knee": knee_of(POINTS, "ttft_ms", "p99"),
        "find_max": None,
        "cost_at_max": None,
        "headline": "4 requests/s is the highest load meeting every SLO",
        "findings": ["limiting SLO, broken at 8 requests/s: chat: ttft_ms p99 <= 500"],
    }
    files = write_sweep(tmp_path, doc)
    page = files["report"].read_text()
    assert page.count("<svg") == 3  # TTFT p99 vs throughput, vs load, throughput vs load
    assert "knee at 4" in page and "SLO p99 ≤ 500 ms" in page
    assert "4 requests/s is the highest load meeting every SLO" in page
    assert len(files["points"].read_text().splitlines()) == 5


# -- end to end ----------------------------------------------------------------------------
# Two sequences at a time (max_num_seqs=2), each 128 in / 32 out at about 240 ms: the
# engine serves about 8.5 requests/s. Arrivals at constant intervals make it a D/D/2
# queue: below capacity nothing waits, above it the backlog grows every second, so
# the TTFT SLO breaks sharply at capacity and a load 20% above the max fails for sure.
SCENARIO = """\
name: capped
api: chat
model: auto
workload: {kind: chat, input_tokens: 128, output_tokens: 32, turns: 1, think_time_s: 0}
load: {rate: {rps: 1, arrival: constant}, duration: 6s}
request: {ignore_eos: true}
slo:
  ttft_ms: {p90: 150}
"""


def slogate(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "slogate.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_find_max_rate_is_confirmed_and_20_percent_more_fails(tmp_path: Path):
    scenario = tmp_path / "capped.yaml"
    scenario.write_text(SCENARIO)
    profile = "llama-3.1-8b@h100:max_num_seqs=2"
    out = tmp_path / "sweep"
    done = slogate(
        "sweep",
        str(scenario),
        "--find-max",
        "rate",
        "--start",
        "8",
        "--tolerance",
        "0.15",
        "--duration",
        "6s",
        "--confirm-duration",
        "8s",
        "--profile",
        profile,
        "--gpu-price-per-hour",
        "2",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    search = doc["find_max"]
    best = doc["max"]
    assert best is not None and search["confirmed"]
    assert search["trials"][-1]["confirmation"] and search["trials"][-1]["passed"]
    assert search["lowest_fail"] <= best * 1.15 + 1e-9
    assert doc["limiting_slo"]["metric"] == "ttft_ms"
    assert doc["cost_at_max"]["per_million_output_tokens"] > 0
    above = slogate(
        "run",
        str(scenario),
        "--profile",
        profile,
        "--rate",
        f"{best * 1.2:g}",
        "--duration",
        "6s",
        "--out",
        str(tmp_path / "above"),
    )
    assert above.returncode == 1, above.stdout[-2000:]
    causes = {f.cause: f for f in diagnose(RunData.load(tmp_path / "above"))}
    assert "ttft_ms" in causes["capacity-bound"].explains[0]


def test_a_trial_short_of_samples_is_rerun_long_enough(tmp_path):
    short = {**slo_entry(TTFT_P99, 120.0, "inconclusive", 76.0), "n": 92, "needed": 368}
    result = TrialResult(tmp_path, 4, summary("inconclusive", [short]))
    assert longer_duration(result, 4.0, 60.0) == 20  # 4 s x 368/92 x 1.25
    assert longer_duration(result, 3.0, 60.0) == 15  # 15 s, rounded up to whole seconds
    assert longer_duration(result, 4.0, 10.0) == 10.0
    assert longer_duration(result, 10.0, 10.0) is None
    failed = TrialResult(tmp_path, 1, summary("fail", [slo_entry(TTFT_P99, 900.0, "fail", -80.0)]))
    assert longer_duration(failed, 4.0, 60.0) is None
