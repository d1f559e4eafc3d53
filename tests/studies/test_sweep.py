"""Sweeps: the limiting SLO, the knee, the report; --find-max end to end on the simulated engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slogate.analysis.diagnosis.diagnose import diagnose
from slogate.analysis.documents.contracts import SloEntry, Summary, WorstSlo
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.versions import SUMMARY_SCHEMA, SWEEP_SCHEMA
from slogate.reports.experiments import write_sweep
from slogate.reports.study_lines import sweep_closing_lines, sweep_trial_line
from slogate.studies.sweep import (
    SweepSettings,
    TrialSpec,
    build_document,
    first_failure,
    knee_metric,
    knee_of,
    limiting_of,
    load_levels,
    longer_duration,
    run_sweep,
    trial_load,
)
from slogate.studies.trials import TrialResult

TTFT_P99 = {"metric": "ttft_ms", "stat": "p99", "threshold": 500.0, "kind": "max"}
TPOT_P95 = {"metric": "tpot_ms", "stat": "p95", "threshold": 50.0, "kind": "max"}


def summary(
    verdict: str, slo: list[dict], reasons: tuple[str, ...] = (), run: dict | None = None
) -> Summary:
    """A trial's summary holding only what the sweep reads, parsed like a real one."""
    block = {"verdict": verdict, "requests": {"ok": 0, "failed": 0, "total": 0},
             "tokens": {"input": 0, "output": 0}, "metrics": {}, "throughput": {},
             "slo": slo}  # fmt: skip
    return Summary.model_validate(
        {"schema": SUMMARY_SCHEMA, "verdict": verdict, "exit_code": 0,
         "invalid_reasons": list(reasons), "scenarios": {"chat": block}, "run": run or {}}
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
        "ttft_ms": {"count": 10, "mean": ttft_p99 / 2, "p95": ttft_p99 * 0.9, "p99": ttft_p99},
        "tpot_ms": {"count": 10, "mean": 10.0, "p95": 11.0, "p99": 12.0},
        "e2e_ms": {"count": 10, "mean": 900.0, "p99": 1000.0},
    }
    return {
        "label": f"{x:g}",
        "x": x,
        "runs": [{"dir": f"runs/{x:g}", "verdict": "pass", "exit_code": 0, "scenario": None}],
        "requests": {"ok": 10, "failed": 0, "total": 10},
        "metrics": metrics,
        "throughput": {"requests_per_s": x, "output_tokens_per_s": tps},
        "cost": None,
    }


POINTS = [point(1, 100, 100), point(2, 104, 200), point(4, 110, 390), point(8, 2500, 420)]


def test_knee_on_the_limiting_slo_curve():
    slos = [
        SloEntry.model_validate(slo_entry(base, 1.0, "pass", 50.0)) for base in (TTFT_P99, TPOT_P95)
    ]
    assert knee_metric(slos, slos[1]) == {"metric": "tpot_ms", "stat": "p95"}
    assert knee_metric(slos, None) == {"metric": "ttft_ms", "stat": "p99"}
    assert knee_metric([], None) == {"metric": "ttft_ms", "stat": "p99"}
    knee = knee_of(POINTS, "ttft_ms", "p99")
    assert knee == {"x": 4, "y": 110, "metric": "ttft_ms", "stat": "p99"}


def test_sweep_report_draws_each_slo_against_throughput_and_load(tmp_path):
    doc = {
        "schema": SWEEP_SCHEMA,
        "mode": "rate",
        "unit": "requests/s",
        "scenario": "chat.yaml",
        "created_at": "now",
        "command": "slogate sweep chat.yaml --rates 1,2,4,8",
        "slo": [{"scenario": "chat", **slo_entry(TTFT_P99, 2500.0, "fail", -400.0)}],
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


# -- the sweep's policy, fed hand-made trial results ------------------------------------
def ttft_engine(capacity: float, out: Path, calls: list[TrialSpec]):
    """A trial runner whose TTFT p99 is 100 ms per unit of load against a 500 ms
    SLO: every load up to ``capacity`` passes (capacity 5 at 500 ms exactly)."""

    def run(spec: TrialSpec) -> TrialResult:
        calls.append(spec)
        value = 100.0 * spec.value
        verdict = "pass" if spec.value <= capacity else "fail"
        margin_pct = (500.0 - value) / 500.0 * 100
        entry = slo_entry(TTFT_P99, value, verdict, margin_pct)
        code = 0 if verdict == "pass" else 1
        return TrialResult(out / "runs" / spec.name, code, summary(verdict, [entry]))

    return run


def test_find_max_users_grows_bisects_and_confirms_longer(tmp_path):
    """From 2 users: 2 and 4 pass, 8 fails; bisect 6 (fail), 5 (pass); 5 and 6 are
    adjacent, so 5 is confirmed in a run twice as long (8 s)."""
    calls: list[TrialSpec] = []
    settings = SweepSettings("capped.yaml", "users", 4.0, find_max=True, start=2)
    run = run_sweep(settings, settings.search(), ttft_engine(5, tmp_path, calls))
    assert [(c.name, c.duration) for c in calls] == [
        ("01-users-2", 4.0),
        ("02-users-4", 4.0),
        ("03-users-8", 4.0),
        ("04-users-6", 4.0),
        ("05-users-5", 4.0),
        ("06-users-5-confirm", 8.0),
    ]
    assert calls[-1].load == {"users": 5, "spawn_rate": 5, "duration": 8.0, "seed": None}
    assert run.finished and run.search.result == 5


def test_sweep_document_names_the_max_the_limiting_slo_and_each_trial(tmp_path):
    settings = SweepSettings("capped.yaml", "users", 4.0, find_max=True, start=2, command="c")
    run = run_sweep(settings, settings.search(), ttft_engine(5, tmp_path, []))
    doc = build_document(run, tmp_path, None)
    assert doc["max"] == 5 and doc["unit"] == "users" and doc["command"] == "c"
    assert [p["x"] for p in doc["points"]] == [2, 4, 5, 6, 8]
    assert doc["headline"] == "5 users is the highest load meeting every SLO"
    # the lowest failure above the max is 6 users: TTFT 600 ms against 500 ms
    assert doc["findings"][0] == (
        "limiting SLO, broken at 6 users: chat: ttft_ms p99 <= 500 (measured 600)"
    )
    assert doc["limiting_slo"]["value"] == 600.0 and doc["limiting_slo"]["margin_pct"] == -20.0
    assert doc["knee"] is None  # the trials saved no data: no curve to bend
    trials = doc["find_max"]["trials"]
    assert [t["dir"] for t in trials][-1] == "runs/06-users-5-confirm"
    assert [t["passed"] for t in trials] == [True, True, False, False, True, True]
    assert doc["find_max"]["confirmed"] and doc["find_max"]["lowest_fail"] == 6


def test_a_search_out_of_trials_is_unfinished_without_a_max(tmp_path):
    calls: list[TrialSpec] = []
    settings = SweepSettings("capped.yaml", "users", 4.0, find_max=True, start=2, max_trials=3)
    run = run_sweep(settings, settings.search(), ttft_engine(5, tmp_path, calls))
    assert len(calls) == 3 and not run.finished
    assert run.search.result is None and run.search.highest_pass == 4
    doc = build_document(run, tmp_path, None)
    assert doc["max"] is None and doc["find_max"]["finished"] is False
    assert doc["headline"].startswith("no load level met every SLO: chat: ttft_ms p99 <= 500")


def test_an_inconclusive_trial_is_rerun_once_and_only_the_rerun_counts(tmp_path):
    """92 samples where 368 bound the p99: the 4 s trial is rerun for
    4 x 368/92 x 1.25 = 20 s; the rerun is inconclusive too and is not rerun again."""
    calls: list[TrialSpec] = []

    def short_of_samples(spec: TrialSpec) -> TrialResult:
        calls.append(spec)
        entry = {**slo_entry(TTFT_P99, 120.0, "inconclusive", 76.0), "n": 92, "needed": 368}
        return TrialResult(tmp_path / spec.name, 4, summary("inconclusive", [entry]))

    settings = SweepSettings("chat.yaml", "rate", 4.0, levels=(2.5,))
    run = run_sweep(settings, settings.search(), short_of_samples)
    assert [(c.name, c.duration) for c in calls] == [("01-rate-2.5", 4.0), ("02-rate-2.5", 20)]
    assert calls[0].load == {"rate": 2.5, "duration": 4.0, "seed": None}
    assert [r.out.name for _, r in run.trials.judged] == ["02-rate-2.5"]
    assert len(run.trials.by_value[2.5]) == 2
    assert settings.longest_trial == 40.0  # no --max-duration: ten trials' worth


def test_each_level_runs_once_and_the_knee_follows_the_limiting_slo(tmp_path):
    """Levels 1, 2, 4, 8: TPOT p95 breaks at 8 (the limiting SLO), so the knee is
    looked for on TPOT p95 even though TTFT p99 is listed first."""
    calls: list[TrialSpec] = []

    def two_slos(spec: TrialSpec) -> TrialResult:
        calls.append(spec)
        ok = spec.value < 8
        entries = [
            slo_entry(TTFT_P99, 100.0, "pass", 80.0),
            slo_entry(
                TPOT_P95, 40.0 if ok else 70.0, "pass" if ok else "fail", 20.0 if ok else -40.0
            ),
        ]
        verdict = "pass" if ok else "fail"
        return TrialResult(tmp_path / "runs" / spec.name, 0 if ok else 1, summary(verdict, entries))

    settings = SweepSettings("chat.yaml", "rate", 4.0, levels=(1, 2, 4, 8))
    run = run_sweep(settings, settings.search(), two_slos)
    assert [c.value for c in calls] == [1, 2, 4, 8] and run.finished
    assert first_failure(run.trials, run.search.highest_pass)[0] == 8
    doc = build_document(run, tmp_path, None)
    assert doc["max"] == 4 and doc["find_max"] is None
    assert doc["limiting_slo"]["metric"] == "tpot_ms"
    slos = [WorstSlo.model_validate(s) for s in doc["slo"]]
    limiting = WorstSlo.model_validate(doc["limiting_slo"])
    assert knee_metric(slos, limiting) == {"metric": "tpot_ms", "stat": "p95"}


def saturated_from(level: float, out: Path, calls: list[TrialSpec]):
    """Every trial passes its SLO, but from ``level`` up the run went past saturation."""

    def run(spec: TrialSpec) -> TrialResult:
        calls.append(spec)
        found = {"at_s": 35.0, "scenario": "chat", "confidence": 0.99,
                 "in_flight_per_s": 2.0, "ttft_ms_per_s": 90.0, "windows": 6,
                 "reason": "chat: past saturation at 35 s"}  # fmt: skip
        checked = {"mode": "monitor", "found": found if spec.value >= level else None}
        entries = [slo_entry(TTFT_P99, 100.0, "pass", 80.0)]
        s = summary("pass", entries, run={"saturation": checked})
        return TrialResult(out / "runs" / spec.name, 0, s)

    return run


def test_levels_stop_climbing_after_the_first_failed_or_saturated_one(tmp_path):
    calls: list[TrialSpec] = []
    settings = SweepSettings("chat.yaml", "rate", 4.0, levels=(1, 2, 4, 8, 16))
    run = run_sweep(settings, settings.search(), ttft_engine(3, tmp_path, calls))
    assert [c.value for c in calls] == [1, 2, 4]  # 4 failed: 8 and 16 would fail too
    doc = build_document(run, tmp_path, None)
    assert doc["skipped_levels"] == [8, 16] and doc["max"] == 2
    assert doc["findings"][-1].startswith("not run: 8, 16 requests/s, above a level that failed")
    calls.clear()
    run = run_sweep(settings, settings.search(), saturated_from(4, tmp_path, calls))
    assert [c.value for c in calls] == [1, 2, 4] and run.skipped == (8, 16)
    assert run.trials.by_value[4][0].saturated and run.trials.by_value[4][0].passed
    calls.clear()
    onward = SweepSettings("chat.yaml", "rate", 4.0, levels=(1, 2, 4, 8, 16), keep_climbing=True)
    run = run_sweep(onward, onward.search(), ttft_engine(3, tmp_path, calls))
    assert [c.value for c in calls] == [1, 2, 4, 8, 16] and run.skipped == ()


def test_a_search_or_level_list_offers_whole_users():
    assert trial_load("users", 5.0, 4.0, 7) == {
        "users": 5,
        "spawn_rate": 5,  # all at once: the trial offers its load from the start
        "duration": 4.0,
        "seed": 7,
    }
    assert type(trial_load("users", 5.0, 4.0, 7)["users"]) is int
    assert trial_load("rate", 2.5, 4.0, None) == {"rate": 2.5, "duration": 4.0, "seed": None}
    assert load_levels("4,1,2,2", integer=False) == [1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="whole numbers of users"):
        load_levels("1.5", integer=True)
    with pytest.raises(ValueError, match="comma-separated numbers"):
        load_levels("1,two", integer=False)
    with pytest.raises(ValueError, match="positive rates"):
        load_levels("0,1", integer=False)


def test_trial_lines_show_the_limit_only_when_a_trial_did_not_pass(tmp_path):
    assert sweep_trial_line(3, 8, "requests/s", False, "fail", "chat: x") == (
        "[3] trial at 8 requests/s: fail (chat: x)"
    )
    assert (
        sweep_trial_line(6, 5, "users", True, "pass", None) == "[6] confirmation at 5 users: pass"
    )
    cost = {"per_million_output_tokens": 0.12345, "per_million_input_tokens": 2}
    doc = {"headline": "h", "findings": ["a", "b"], "cost_at_max": cost}
    assert sweep_closing_lines(doc, tmp_path / "report.html") == [
        "slogate: h",
        "slogate: a",
        "slogate: b",
        "slogate: cost at the max: 0.1235 per million output tokens, 2 per million input tokens",
        f"slogate: report {tmp_path / 'report.html'}",
    ]
