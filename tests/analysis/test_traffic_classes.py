"""A traffic class is judged by its own SLOs through the one judge, so
summary.json, JUnit (a suite per class), the report and the exit code agree;
its block says how much of the wait it did and what it had shed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from reportdata import bucket, run_of

from slogate.analysis.measurement.recorder import count_into
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.reports import write_results


def shed(status: int) -> RequestRecord:
    kind = ErrorKind.HTTP_429 if status == 429 else ErrorKind.HTTP_5XX
    record = RequestRecord(scenario="batch", start_ns=1, http_status=status)
    return record.fail(kind, f"HTTP {status}", 2)


def test_each_class_is_judged_by_its_own_slos_everywhere(tmp_path: Path) -> None:
    """Interactive waits 100 ms, batch 900 ms: interactive meets its 200 ms,
    batch misses its 500 ms; batch also had two requests shed with 429 and one
    with 503. summary.json, JUnit, the report and the exit code say the same."""
    interactive = bucket({"ttft": [100.0] * 200, "e2e": [300.0] * 200})
    batch = bucket({"ttft": [900.0] * 200, "e2e": [1200.0] * 200})
    for status in (429, 429, 503):
        record = shed(status)
        count_into(batch.counters, record, request_metrics(record), False)
    slo = {
        "interactive": [{"metric": "ttft_ms", "stat": "p95", "limit": 200.0}],
        "batch": [{"metric": "ttft_ms", "stat": "p95", "limit": 500.0}],
    }
    run = run_of({"interactive": interactive, "batch": batch}, slo)
    for name, priority in (("interactive", 0), ("batch", 10)):
        declared = run.meta["scenarios"][name]
        declared["class"] = {"priority": priority, "body": {}, "headers": {"x-team": name}}
    outcome = write_results(tmp_path, run)
    assert outcome.exit_code == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    blocks = {name: summary["scenarios"][name] for name in ("interactive", "batch")}
    assert [b["verdict"] for b in blocks.values()] == ["pass", "fail"]
    high, low = (b["traffic_class"] for b in blocks.values())
    assert high["priority"] == 0 and low["priority"] == 10
    assert high["wait_s"] == pytest.approx(20.0, rel=0.01)
    assert low["wait_s"] == pytest.approx(180.0, rel=0.01)
    assert high["wait_share"] == pytest.approx(0.1, abs=0.002)
    assert low["sheds"] == {"429": 2, "503": 1} and high["sheds"] == {"429": 0, "503": 0}
    suites = {
        s.get("name"): s for s in ET.parse(tmp_path / "junit.xml").getroot().iter("testsuite")
    }
    assert set(suites) == {"slogate.class.interactive", "slogate.class.batch"}
    assert suites["slogate.class.interactive"].get("failures") == "0"
    failed = [c.get("name") for c in suites["slogate.class.batch"] if c.find("failure") is not None]
    assert failed == ["ttft_ms p95 <= 500"]
    report = (tmp_path / "report.html").read_text()
    assert 'id="classes"' in report and "x-team: batch" in report
    markdown = (tmp_path / "summary.md").read_text()
    line = "- class batch, priority 10: 90.0% of the wait for first tokens, shed 2 with 429"
    assert f"{line} and 1 with 503" in markdown
