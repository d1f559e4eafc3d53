"""--abort-on-fail on real runs against the exact-schedule server: a TTFT SLO that
fails clearly ends the run within its first quarter, FAIL, with the reason and
every measured request kept; a passing run runs to the end."""

from __future__ import annotations

import pytest
from loadruns import scenario_file, slogate, summary

from slogate.engines.exact import ExactEngine

pytestmark = pytest.mark.slow
SLOW_FIRST_TOKEN = {"ttft_ms": 200, "itl_ms": 10}


def run_gate(tmp_path, ttft_p50_limit: float, duration: str, *flags: str):
    scenario = scenario_file(
        tmp_path,
        "exact-open",
        load={"rate": {"rps": 20, "arrival": "constant"}, "duration": duration},
        slo={"ttft_ms": {"p50": ttft_p50_limit}},
    )
    out = tmp_path / "out"
    with ExactEngine(SLOW_FIRST_TOKEN) as engine:
        done = slogate("run", str(scenario), "--host", engine.url, "--out", str(out), *flags)
    return done, out


def test_a_clearly_failing_ttft_slo_stops_the_run_within_its_first_quarter(tmp_path):
    done, out = run_gate(tmp_path, 50.0, "60s", "--abort-on-fail", "--abort-min-window", "5s")
    assert done.returncode == 1, done.stderr[-3000:]
    s = summary(out)
    stop = s["run"]["stopped_early"]
    assert stop["slo"] == "ttft_ms p50 <= 50" and stop["measured_s"] >= 5.0
    assert stop["at_s"] < 15.0  # a quarter of 60 s
    assert s["verdict"] == "fail" and s["run"]["complete"] is True
    assert s["run"]["measured_s"] < 15.0
    chat = s["scenarios"]["exact-open"]
    assert chat["requests"]["ok"] >= 5 * 20 * 0.9  # what was measured is kept
    assert (out / "data").is_dir()
    assert "--abort-on-fail: stopping at" in done.stderr
    assert "Stopped early</b> by --abort-on-fail" in (out / "report.html").read_text()
    assert "Stopped early (--abort-on-fail)" in (out / "summary.md").read_text()


def test_a_passing_run_with_abort_on_fail_runs_to_the_end(tmp_path):
    done, out = run_gate(tmp_path, 1000.0, "8s", "--abort-on-fail", "--abort-min-window", "1s")
    assert done.returncode == 0, done.stderr[-3000:]
    s = summary(out)
    assert s["run"]["stopped_early"] is None and s["run"]["complete"] is True
    assert s["run"]["measured_s"] == pytest.approx(8.0, abs=0.5)
