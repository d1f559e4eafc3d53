"""`slogate sweep` of a replayed agent tree scenario: the load is counted in
concurrent sessions, and each SLO tier gets the most sessions under it, with
the curve in the report."""

from __future__ import annotations

import json

import pytest
from agent_traces import WEKA
from loadruns import slogate

pytestmark = pytest.mark.slow


def test_sweep_reports_sessions_per_tier(tmp_path):
    scenario = tmp_path / "agents.yaml"
    scenario.write_text(
        json.dumps(
            {
                "name": "agents",
                "workload": {"kind": "agent-trace", "file": str(WEKA), "wait_cap_s": 0.05},
                "load": {"users": 1, "duration": "5s"},
                "slo": {"ttft_ms": {"p50": 60000}},
                "slo_tiers": {
                    "never": {"ttft_ms": {"p50": 0.001}},  # no TTFT is a microsecond
                    "always": {"ttft_ms": {"p50": 60000}, "error_rate": {"max": 0.5}},
                },
            }
        )
    )
    out = tmp_path / "sweep"
    done = slogate("sweep", str(scenario), "--users", "1,2", "--duration", "5s", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["unit"] == "concurrent sessions"
    tiers = {t["name"]: t for t in doc["tiers"]}
    assert tiers["never"]["max"] is None
    assert [p["passed"] for p in tiers["never"]["points"]] == [False, False]
    assert tiers["always"]["max"] == 2
    assert "tier always: at most 2 concurrent sessions" in done.stdout
    report = (out / "report.html").read_text()
    assert "SLO tiers" in report and "<svg" in report  # the tiers beside the curve
