"""--repeat: the spread of each SLO statistic across identical runs (hand-checked
numbers), the combined verdict, the outputs of a repeat set, a comparison of
two sets on their spread, and three real runs on the simulated engine."""

from __future__ import annotations

import json
import math

import pytest
from loadruns import cli, scenario_file, slogate, summary
from reportdata import bucket, run_of

from slogate.analysis.documents.contracts import Repeats, parse
from slogate.analysis.verdict.slo import Verdict
from slogate.analysis.verdict.spread import spread, spread_verdict
from slogate.reports import write_results
from slogate.reports.repeat_set import repeats_table, write_repeats
from slogate.run_cmd import auto_baseline_of, run_folder
from slogate.studies.repeats import (
    auto_repeat_baseline,
    build_document,
    compare_repeats,
    with_baseline,
)
from slogate.studies.trials import finished_trial

T_975_2 = 4.302652729749462  # Student-t, 2 degrees of freedom, 97.5% (tables: 4.303)


def test_spread_of_three_runs_by_hand() -> None:
    """10, 12, 14: mean 12, sd sqrt((4 + 0 + 4) / 2) = 2, CV 2/12, and the 95%
    interval 12 ± 4.3027 * 2 / sqrt(3) = 12 ± 4.968."""
    s = spread([10.0, 12.0, 14.0])
    assert (s.mean, s.sd, s.n) == (12.0, 2.0, 3)
    assert s.cv == pytest.approx(1 / 6)
    half = T_975_2 * 2 / math.sqrt(3)
    assert half == pytest.approx(4.968, abs=1e-3)
    assert (s.lower, s.upper) == (pytest.approx(12 - half), pytest.approx(12 + half))


def test_a_run_without_the_value_is_left_out_and_one_value_has_no_spread() -> None:
    s = spread([10.0, None, 14.0])  # mean 12, sd sqrt(8), t(0.975, 1) = 12.706
    assert (s.n, s.mean, s.sd) == (2, 12.0, pytest.approx(math.sqrt(8)))
    assert s.upper == pytest.approx(12 + 12.7062047 * math.sqrt(8) / math.sqrt(2))
    alone = spread([10.0])
    assert (alone.mean, alone.sd, alone.lower, alone.upper) == (10.0, None, None, None)
    assert spread_verdict(alone, "max", 100.0) is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    ("values", "kind", "threshold", "verdict"),
    [
        ([10.0, 12.0, 14.0], "max", 17.0, Verdict.PASS),  # whole interval [7.03, 16.97] below
        ([10.0, 12.0, 14.0], "max", 16.9, Verdict.INCONCLUSIVE),  # the limit inside it
        ([10.0, 12.0, 14.0], "max", 7.0, Verdict.FAIL),  # the whole interval above
        ([10.0, 12.0, 14.0], "min", 7.0, Verdict.PASS),
        ([10.0, 12.0, 14.0], "min", 17.0, Verdict.FAIL),
        ([10.0, 12.0, 14.0], "min", 12.0, Verdict.INCONCLUSIVE),
    ],
)
def test_the_verdict_rests_on_the_whole_interval(values, kind, threshold, verdict) -> None:
    assert spread_verdict(spread(values), kind, threshold) is verdict


def repeat_set(tmp_path, ttfts_ms, name="set", invalid_run=None):
    """Runs whose TTFT is ``ttfts_ms[i]`` for every request (SLO: TTFT p50 <= 200
    ms), written as real results folders and read back as a repeat set's runs."""
    out = tmp_path / name
    results = []
    for index, ttft in enumerate(ttfts_ms, 1):
        chat = bucket({"ttft": [ttft] * 400, "e2e": [ttft + 500.0] * 400})
        slo = {"chat": [{"metric": "ttft_ms", "stat": "p50", "limit": 200.0, "kind": "max"}]}
        meta = {"run_id": f"r{index}"}
        if index == invalid_run:
            meta["complete"] = False
            meta["incomplete_reason"] = "interrupted"
        folder = run_folder(out, index)
        outcome = write_results(folder, run_of({"chat": chat}, slo=slo, **meta))
        results.append(finished_trial(folder, outcome.exit_code))
    return out, results


def test_a_repeat_set_is_judged_on_its_spread_and_shown_everywhere(tmp_path) -> None:
    out, results = repeat_set(tmp_path, [100.0, 120.0, 140.0])
    doc = build_document(results, out, asked=3, cooldown_s=0.0, command="slogate run chat")
    ttft = doc["scenarios"]["chat"]["slo"][0]
    assert ttft["values"] == [pytest.approx(v, rel=1e-3) for v in (100.0, 120.0, 140.0)]
    assert ttft["mean"] == pytest.approx(120.0, rel=1e-3)
    assert ttft["sd"] == pytest.approx(20.0, rel=1e-2)
    assert ttft["ci"][1] == pytest.approx(120 + T_975_2 * 20 / math.sqrt(3), rel=1e-2)  # 169.7
    assert ttft["run_verdicts"] == ["pass", "pass", "pass"]
    assert (ttft["verdict"], doc["verdict"], doc["exit_code"]) == ("pass", "pass", 0)
    assert [r["dir"] for r in doc["runs"]] == ["run-1", "run-2", "run-3"]
    p99 = doc["scenarios"]["chat"]["metrics"]["ttft_ms"]["p99"]
    assert p99["mean"] == pytest.approx(120.0, rel=1e-3) and p99["n"] == 3
    files = write_repeats(out, doc)
    assert parse(Repeats, json.loads(files["summary"].read_text()), "summary").verdict == "pass"
    report = files["report"].read_text()
    assert 'href="run-2/report.html"' in report and "95% CI of the mean" in report
    assert "120.0 ms" in report and "169.7 ms" in report
    md = files["markdown"].read_text()
    assert "3 repeats, PASS on their spread (exit 0)" in md and "\\| run-3 \\|" not in md
    assert "| run-3 | pass | 0 |" in md
    prom = files["metrics"].read_text()
    assert 'slogate_repeat_slo_mean{scenario="chat",slo="ttft_ms p50",unit="ms"} 120' in prom
    assert 'slogate_repeat_verdict{slogate_repeat_verdict="pass"} 1.0' in prom
    assert "slogate_exit_code 0.0" in prom


def test_runs_that_disagree_across_the_limit_are_inconclusive(tmp_path) -> None:
    """150, 190, 230 ms against 200: each run alone passes or fails; the interval
    190 ± 99 straddles the limit, so the set cannot say: exit 4."""
    out, results = repeat_set(tmp_path, [150.0, 190.0, 230.0])
    doc = build_document(results, out, asked=3, cooldown_s=0.0, command="")
    ttft = doc["scenarios"]["chat"]["slo"][0]
    assert ttft["run_verdicts"] == ["pass", "pass", "fail"]
    assert (ttft["verdict"], doc["verdict"], doc["exit_code"]) == (
        "inconclusive",
        "inconclusive",
        4,
    )
    unbounded = {**doc, "scenarios": {"chat": {**doc["scenarios"]["chat"], "slo": [
        {**ttft, "values": [150.0, None, 230.0], "run_verdicts": ["pass", "inconclusive", "fail"]}
    ]}}}  # fmt: skip
    assert "150 ms, unbounded, 230 ms" in repeats_table(unbounded, "report.html")


def test_a_set_with_an_untrusted_or_missing_run_is_invalid(tmp_path) -> None:
    out, results = repeat_set(tmp_path, [100.0, 110.0], invalid_run=2)
    doc = build_document(results, out, asked=3, cooldown_s=0.0, command="")
    assert (doc["verdict"], doc["exit_code"]) == ("invalid", 3)
    assert doc["invalid_reasons"] == [
        "run-2: invalid: run incomplete: interrupted",
        "2 of 3 runs ran (the set was stopped)",
    ]


def test_sets_compare_on_their_spread(tmp_path) -> None:
    """A mean 10% higher inside both intervals is uncertain, no regression; one
    60% higher with the intervals apart is a regression."""
    base_out, base = repeat_set(tmp_path, [100.0, 110.0, 120.0], "base")
    base_doc = parse(Repeats, build_document(base, base_out, 3, 0.0, ""), "base")
    for ttfts, verdict in (([105.0, 125.0, 133.0], "no regression"),
                           ([170.0, 176.0, 182.0], "regression")):  # fmt: skip
        new_out, new = repeat_set(tmp_path, ttfts, f"new-{verdict}")
        new_doc = parse(Repeats, build_document(new, new_out, 3, 0.0, ""), "new")
        comparison = compare_repeats(base_doc, new_doc)
        p99 = next(d for d in comparison.deltas if (d.metric, d.stat) == ("ttft_ms", "p99"))
        assert comparison.verdict == verdict
        assert p99.status == ("uncertain" if verdict == "no regression" else "worse")
        gated = with_baseline(build_document(new, new_out, 3, 0.0, ""), base_doc, "base", "new")
        assert gated["verdict"] == "pass"  # 182 ms is within the 200 ms SLO: the baseline gates
        assert (gated["baseline"]["verdict"], gated["exit_code"]) == (
            verdict,
            0 if verdict == "no regression" else 1,
        )
        write_repeats(new_out, gated)
    write_repeats(base_out, base_doc)
    done = cli("compare", str(base_out), str(tmp_path / "new-regression"))
    assert done.returncode == 1, done.stderr
    assert "REGRESSION" in done.stdout and "ttft_ms p99" in done.stdout
    assert cli("compare", str(base_out), str(tmp_path / "new-no regression")).returncode == 0
    single = cli("compare", str(base_out), str(base_out / "run-1"))
    assert single.returncode == 2 and "repeat set" in single.stderr


def test_the_repeat_set_has_a_schema() -> None:
    schema = json.loads(cli("schema", "repeats").stdout)
    assert "RepeatSlo" in schema["$defs"] and schema["properties"]["schema"]["const"]


def test_repeat_flags_that_cannot_work_stop_before_any_load(tmp_path) -> None:
    single, _ = repeat_set(tmp_path, [100.0], "single")
    done = cli("run", "chat", "--repeat", "2", "--baseline", str(single / "run-1"),
               "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 2
    assert "--baseline with --repeat: expected a repeat set's folder" in done.stderr
    ui = cli("run", "chat", "--repeat", "2", "--web-ui", "--out", str(tmp_path / "out"))
    assert ui.returncode == 2 and "--repeat runs headless" in ui.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_three_runs_on_the_simulated_engine_give_three_reports_and_a_spread(tmp_path) -> None:
    # closed loop: a busy test machine cannot make its runs invalid by late arrivals
    load = {"rate": None, "users": 2, "duration": "4s"}
    workload = {"kind": "chat", "text": "prose", "input_tokens": 32, "output_tokens": 4,
                "turns": 1, "think_time_s": 0}  # fmt: skip
    scenario = scenario_file(tmp_path, "exact-open", load=load, workload=workload)
    out = tmp_path / "out"
    done = slogate("run", str(scenario), "--repeat", "3", "--cooldown", "1s", "--warmup", "0s",
                   "--out", str(out), timeout=240)  # fmt: skip
    s = summary(out)
    assert done.returncode == s["exit_code"], done.stderr[-3000:]
    assert [r["dir"] for r in s["runs"]] == ["run-1", "run-2", "run-3"]
    for index in (1, 2, 3):
        run = summary(out / f"run-{index}")
        assert (out / f"run-{index}" / "report.html").is_file()
        assert run["scenarios"]["exact-open"]["requests"]["ok"] > 0
    ttft = s["scenarios"]["exact-open"]["slo"][0]
    assert ttft["n"] == 3 and ttft["sd"] is not None and ttft["ci"][0] <= ttft["mean"]
    runs = [
        summary(out / f"run-{i}")["scenarios"]["exact-open"]["slo"][0]["value"] for i in (1, 2, 3)
    ]
    assert ttft["values"] == runs
    assert "cool-down 1 s before run 2 of 3" in done.stdout
    assert "3 runs, combined verdict" in done.stdout
    assert "run-3/report.html" in (out / "report.html").read_text()


def test_baseline_auto_is_the_newest_earlier_set_of_the_same_scenario_and_target(tmp_path) -> None:
    def written(name: str, ttfts: list[float], created_at: str, **change) -> None:
        out, results = repeat_set(tmp_path, ttfts, name)
        doc = {**build_document(results, out, len(ttfts), 0.0, ""), "created_at": created_at}
        write_repeats(out, {**doc, **change})

    written("old", [100.0, 110.0], "2026-01-01T00:00:00")
    written("newer", [100.0, 110.0], "2026-01-02T00:00:00")
    written("newest-invalid", [100.0, 110.0], "2026-01-03T00:00:00", verdict="invalid")
    written("now", [100.0, 110.0], "2026-01-04T00:00:00")
    this = tmp_path / "now"
    assert auto_baseline_of(json.loads((this / "summary.json").read_text()), this) == (
        tmp_path / "newer"
    )
    other = auto_repeat_baseline(tmp_path, ["chat"], ("sglang", "test-model"), exclude=this)
    assert other is None  # another engine's sets are no baseline
