"""Controlled experiments: trends, pooling, the report; and the four experiments end to end.

The end-to-end tests run `slogate experiment` on the simulated engine with
short trials and assert the expected trends on the numbers it saved.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.versions import EXPERIMENT_SCHEMA
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord
from slogate.reports.experiments import write_experiment
from slogate.studies.points import (
    FALLS,
    FLAT,
    MIXED,
    RISES,
    Expectation,
    direction,
    point_block,
    trend,
)

MS = 1_000_000


def test_direction_of_rising_falling_flat_and_mixed_series():
    assert direction([10, 20, 80], [1, 2, 4])[0] == RISES
    assert direction([80, 20, 10], [1, 2, 4])[0] == FALLS
    assert direction([10, 10.5, 11], [1, 2, 4])[0] == FLAT
    assert direction([10, 40, 12, 30], [1, 2, 3, 4])[0] == MIXED
    assert direction([10, 20, 80], [1, 2, 4]) == (RISES, 8.0, 8.0, 1.0)


def test_direction_orders_by_x_not_by_position():
    assert direction([80, 10, 20], [4, 1, 2])[0] == RISES


def test_trend_reads_its_path_and_says_whether_it_holds():
    points = [
        {"x": 128, "metrics": {"ttft_ms": {"mean": 12.0}}},
        {"x": 2048, "metrics": {"ttft_ms": {"mean": 60.0}}},
        {"x": 8192, "metrics": {"ttft_ms": {"mean": 210.0}}},
    ]
    t = trend(Expectation("TTFT grows", ("metrics", "ttft_ms", "mean"), RISES), points)
    assert t.holds and t.observed == RISES and t.ratio == 17.5
    assert "128: 12, 2048: 60, 8192: 210" in t.describe()
    t = trend(Expectation("TTFT flat", ("metrics", "ttft_ms", "mean"), FLAT), points)
    assert not t.holds and t.describe().endswith("NOT as expected (flat)")


def run_with(ttft_ms: float, count: int, seconds: float) -> RunData:
    recorder = Recorder()
    for i in range(count):
        chunks = [int((ttft_ms + 10 * k) * MS) for k in range(8)]
        record = RequestRecord(
            scenario="s",
            start_ns=0,
            end_ns=chunks[-1],
            chunk_ns=chunks,
            chunk_chars=[3] * 8,
            output_tokens=8,
            input_tokens=100,
        )
        recorder.record(record, wall_s=float(i))
    return RunData(meta={"measured_s": seconds, "scenarios": {"s": {}}}, buckets=recorder.buckets)


def test_point_pools_runs_exactly():
    block = point_block([run_with(100, 30, 10.0), run_with(300, 10, 10.0)])
    assert block["requests"]["ok"] == 40
    ttft = block["metrics"]["ttft_ms"]
    assert ttft["count"] == 40
    assert ttft["p50"] == pytest.approx(100, rel=2e-3)
    assert ttft["p99"] == pytest.approx(300, rel=2e-3)
    assert ttft["mean"] == pytest.approx(150, rel=2e-3)
    assert block["throughput"]["requests_per_s"] == 2.0
    assert block["throughput"]["output_tokens_per_s"] == 16.0


def test_experiment_report_escapes_and_draws(tmp_path):
    point = {
        "label": "<b>fp8</b>",
        "x": 1.0,
        "runs": [{"dir": "runs/x-r1", "repeat": 1, "verdict": "pass", "exit_code": 0}],
        "weight_bytes": 9e9,
        "cost": None,
        **point_block([run_with(100, 30, 10.0)]),
    }
    doc = {
        "schema": EXPERIMENT_SCHEMA,
        "factor": "precision",
        "title": "Experiment: weight precision",
        "x_label": "bytes per weight",
        "values": ["fp8", "bf16"],
        "repeats": 1,
        "command": "slogate experiment precision",
        "held": {"engine": "<script>alert(1)</script>"},
        "created_at": "now",
        "points": [point, {**point, "label": "bf16", "x": 2.0, "weight_bytes": 16e9}],
        "trends": [{"holds": True, "text": "memory grows"}],
    }
    files = write_experiment(tmp_path, doc)
    page = files["report"].read_text()
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "&lt;b&gt;fp8&lt;/b&gt;" in page
    assert page.count("<svg") == 3
    rows = files["points"].read_text().splitlines()
    assert rows[0].startswith("label,x,runs,") and len(rows) == 3
    assert files["runs"].read_text().count("runs/x-r1") == 2


# -- end to end on the simulated engine -------------------------------------------------
def experiment(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "slogate.cli", "experiment", *args, "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((out / "experiment.json").read_text())
    assert (out / "report.html").is_file() and (out / "points.csv").is_file()
    return doc


def means(doc: dict, metric: str) -> list[float]:
    return [p["metrics"][metric]["mean"] for p in doc["points"]]


@pytest.mark.slow
def test_prompt_length_experiment_ttft_rises(tmp_path):
    doc = experiment(
        tmp_path,
        "prompt-length",
        "--values",
        "128,2048,8192",
        "--output-tokens",
        "8",
        "--duration",
        "3s",
    )
    ttft = means(doc, "ttft_ms")
    assert ttft[0] < ttft[1] < ttft[2]
    assert ttft[2] > 5 * ttft[0]
    (t,) = doc["trends"]
    assert t["holds"] and t["observed"] == "rises"


@pytest.mark.slow
def test_output_length_experiment_tpot_is_stable(tmp_path):
    doc = experiment(
        tmp_path,
        "output-length",
        "--values",
        "16,64,256",
        "--input-tokens",
        "256",
        "--duration",
        "5s",  # a 256-token request takes 1.9 s: one user finishes two, not one at the edge
    )
    tpot = means(doc, "tpot_ms")
    assert max(tpot) / min(tpot) < 1.15
    e2e = means(doc, "e2e_ms")
    assert e2e[0] < e2e[1] < e2e[2]
    assert doc["trends"][0]["holds"]


@pytest.mark.slow
def test_concurrency_experiment_trades_latency_for_throughput(tmp_path):
    doc = experiment(
        tmp_path,
        "concurrency",
        "--values",
        "1,4,16",
        "--input-tokens",
        "256",
        "--output-tokens",
        "32",
        "--duration",
        "3s",
        "--gpu-price-per-hour",
        "2",
    )
    tps = [p["throughput"]["output_tokens_per_s"] for p in doc["points"]]
    assert tps[0] < tps[1] < tps[2]
    e2e = means(doc, "e2e_ms")
    assert e2e[0] < e2e[2]
    assert all(t["holds"] for t in doc["trends"])
    costs = [p["cost"]["per_million_output_tokens"] for p in doc["points"]]
    assert costs[0] > costs[1] > costs[2]  # batching makes tokens cheaper
    assert costs[0] == pytest.approx(2.0 / (tps[0] * 3600) * 1e6, rel=1e-6)


@pytest.mark.slow
def test_precision_experiment_memory_and_speed(tmp_path):
    doc = experiment(
        tmp_path,
        "precision",
        "--values",
        "bf16,fp8,int4",
        "--input-tokens",
        "128",
        "--output-tokens",
        "32",
        "--duration",
        "3s",
    )
    by = {p["label"]: p for p in doc["points"]}
    assert by["bf16"]["weight_bytes"] > by["fp8"]["weight_bytes"] > by["int4"]["weight_bytes"]
    tpot = {k: p["metrics"]["tpot_ms"]["mean"] for k, p in by.items()}
    assert tpot["bf16"] > tpot["fp8"] > tpot["int4"]
    assert all(t["holds"] for t in doc["trends"])
