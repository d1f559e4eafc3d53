"""The results folder: files written, JUnit structure, escaping, secrets, re-rendering."""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markupsafe import escape
from reportdata import HOSTILE, bucket, realistic_run, run_of

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.recorder import GoodputLimits, Recorder
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.analysis.measurement.timeseries import window_row
from slogate.analysis.verdict.compare import compare
from slogate.reports import comparison_text, rerender, write_comparison, write_index, write_results

EXPECTED_FILES = {
    "summary.json",
    "junit.xml",
    "percentiles.csv",
    "timeseries.csv",
    "report.html",
    "summary.md",
    "metrics.prom",
}
HOSTILE_MODEL = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunData]:
    out = tmp_path_factory.mktemp("run")
    run = realistic_run()
    run.meta["engine"] = {"owned_by": "vllm", "model": HOSTILE_MODEL}
    run.meta["command"] = "slogate run chat.yaml --api-key sk-topsecret123456"
    run.meta["scenarios"]["chat"]["slo"].append(
        {"metric": "ttft_ms", "stat": "p50", "limit": 100.0, "kind": "max"}
    )
    run.meta["scenarios"]["chat"]["raw"] = {"name": "chat", "note": "</pre><b>raw</b>"}
    run.server_metrics[0]["series"]['<svg onload="x">'] = 1.0
    run.save(out)
    write_results(out, run)
    return out, run


def test_every_file_is_written_and_the_verdict_returned(tmp_path: Path) -> None:
    outcome = write_results(tmp_path, realistic_run())
    assert {p.name for p in outcome.files.values()} == EXPECTED_FILES
    assert all((tmp_path / name).is_file() for name in EXPECTED_FILES)
    assert outcome.verdict == "pass" and outcome.exit_code == 0
    assert json.loads((tmp_path / "summary.json").read_text()) == outcome.summary


def junit_cases(path: Path) -> tuple[ET.Element, list[ET.Element]]:
    """Parse junit.xml and check the JUnit schema's required structure (the Ant/
    Jenkins XSD: testsuites > testsuite[name,tests,failures,errors] > testcase[name,
    classname,time] with at most one failure/error/skipped child), counts included."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    cases = []
    for suite in root:
        assert suite.tag == "testsuite"
        for attr in ("name", "tests", "failures", "errors", "time", "timestamp"):
            assert suite.get(attr) is not None, attr
        suite_cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(suite_cases)
        outcomes = [
            [c for c in case if c.tag in ("failure", "error", "skipped")] for case in suite_cases
        ]
        assert all(len(o) <= 1 for o in outcomes)
        assert int(suite.get("failures")) == sum(o[0].tag == "failure" for o in outcomes if o)
        assert int(suite.get("errors")) == sum(o[0].tag == "error" for o in outcomes if o)
        for case in suite_cases:
            assert case.get("name") and case.get("classname") and case.get("time") is not None
            for child in case:
                assert child.tag in ("failure", "error", "skipped", "system-out", "system-err")
                if child.tag in ("failure", "error"):
                    assert child.get("message") and child.get("type")
        cases += suite_cases
    assert int(root.get("tests")) == len(cases)
    return root, cases


def test_junit_has_one_case_per_slo_and_explains_failures(written: tuple[Path, RunData]) -> None:
    out, _ = written
    _, cases = junit_cases(out / "junit.xml")
    names = [c.get("name") for c in cases]
    assert names == [
        "run valid",
        "ttft_ms p99 <= 2000",
        "itl_ms p95 <= 60",
        "error_rate max <= 0.01",
        "ttft_ms p50 <= 100",
    ]
    failure = cases[-1].find("failure")
    assert failure is not None
    for part in ("ttft_ms p50 = ", "threshold <= 100 ms", "margin -", "95% CI", "n=4000"):
        assert part in failure.text


def test_junit_marks_inconclusive_and_invalid_runs_as_errors(tmp_path: Path) -> None:
    run = run_of(
        {"a": bucket({"ttft": [5.0] * 20})},
        slo={"a": [{"metric": "ttft_ms", "stat": "p99", "limit": 100.0}]},
        complete=False,
        incomplete_reason="engine went away \x00\x1b[31m <b>",
    )
    write_results(tmp_path, run)
    _, cases = junit_cases(tmp_path / "junit.xml")
    errors = {c.get("name"): c.find("error") for c in cases}
    assert errors["run valid"] is not None
    assert "engine went away" in errors["run valid"].get("message")
    assert errors["ttft_ms p99 <= 100"].get("type") == "SLOInconclusive"


def test_hostile_server_text_is_shown_as_text(written: tuple[Path, RunData]) -> None:
    out, _ = written
    page = (out / "report.html").read_text()
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    assert "<svg onload" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    assert "&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;b&gt;raw&lt;/b&gt;" in page
    assert str(escape(HOSTILE)) in page


def test_the_report_is_self_contained(written: tuple[Path, RunData]) -> None:
    page = (written[0] / "report.html").read_text()
    assert not re.search(r"""\b(src|href|xlink:href)\s*=\s*["']?\s*(https?:|//)""", page, re.I)
    assert "url(" not in page and "@import" not in page and "<link" not in page
    assert page.count("<svg") >= 10


def test_secrets_never_reach_the_outputs(written: tuple[Path, RunData]) -> None:
    out, _ = written
    for name in EXPECTED_FILES:
        assert "sk-topsecret123456" not in (out / name).read_text(), name


def test_csv_files_agree_with_the_summary(written: tuple[Path, RunData]) -> None:
    out, run = written
    summary = json.loads((out / "summary.json").read_text())
    with (out / "percentiles.csv").open() as f:
        rows = list(csv.DictReader(f))
    ttft = next(r for r in rows if r["span"] == "all" and r["metric"] == "ttft_ms")
    assert float(ttft["p99"]) == summary["scenarios"]["chat"]["metrics"]["ttft_ms"]["p99"]
    assert float(ttft["p99_lower"]) <= float(ttft["p99"]) <= float(ttft["p99_upper"])
    assert {r["span"] for r in rows} >= {"all", "stage:hot", "stage:warm", "turn:1"}
    with (out / "timeseries.csv").open() as f:
        series = list(csv.DictReader(f))
    assert len(series) == len(run.timeseries)
    assert series[5]["errors_http_5xx"] == "1"
    assert series[0]["errors_http_5xx"] == ""


def test_rerender_from_the_saved_folder_reproduces_the_summary(
    written: tuple[Path, RunData],
) -> None:
    out, _ = written
    before = (out / "summary.json").read_text()
    (out / "report.html").unlink()
    outcome = rerender(out)
    assert (out / "summary.json").read_text() == before
    assert (out / "report.html").is_file()
    assert outcome.exit_code == 1


def test_rerender_compares_with_the_baseline_named_in_the_run(tmp_path: Path) -> None:
    base_dir, new_dir = tmp_path / "base", tmp_path / "new"
    realistic_run(seed=5).save(base_dir)
    new = realistic_run(seed=6, scale=1.3)
    new.meta["baseline"] = str(base_dir)
    new.save(new_dir)
    first = write_results(new_dir, new, RunData.load(base_dir))
    assert first.comparison is not None and first.comparison.regressions
    again = rerender(new_dir)
    assert again.summary == json.loads(json.dumps(first.summary))
    assert "Baseline comparison" in (new_dir / "report.html").read_text()
    new.meta["baseline"] = str(tmp_path / "gone")
    new.save(new_dir)
    missing = rerender(new_dir)
    assert "gone" in missing.summary["baseline"]["error"]


def test_index_lists_runs_newest_first_with_trends(tmp_path: Path) -> None:
    for i, scale in enumerate((1.0, 1.1, 1.3)):
        run = realistic_run(n=1000, seed=i, scale=scale)
        run.meta["run_id"] = f"run-{i}"
        run.meta["started_at"] = f"2026-01-0{i + 1}T00:00:00"
        write_results(tmp_path / f"run <{i}>", run)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{not json")
    page = write_index(tmp_path).read_text()
    table = page[page.index('<table id="runs">') :]
    assert (
        table.index("run &lt;2&gt;") < table.index("run &lt;1&gt;") < table.index("run &lt;0&gt;")
    )
    assert 'href="run%20%3C2%3E/report.html"' in table
    assert page.count('<svg class="chart"') == 3  # one per SLO of the chat scenario
    assert "broken" in page


def test_compare_outputs(tmp_path: Path) -> None:
    comparison = compare(realistic_run(seed=1), realistic_run(seed=2, scale=1.25))
    text = comparison_text(comparison)
    assert text.startswith("REGRESSION")
    assert "chat ttft_ms p99" in text and "REGRESSION" in text.splitlines()[1]
    files = write_comparison(tmp_path, comparison)
    assert json.loads(files["json"].read_text())["exit_code"] == 1
    page = files["html"].read_text()
    [ttft_p99] = [
        d for d in comparison.deltas if (d.scenario, d.metric, d.stat) == ("chat", "ttft_ms", "p99")
    ]
    [row] = [
        row
        for row in page.split("<tr")
        if '<td class="l">ttft_ms</td>' in row and '"l">p99 <span class="muted">(gated)' in row
    ]
    assert f"<td>{ttft_p99.change_pct:+.1f}%</td>" in row and "regression" in row
    assert page.count('<tr class="regression">') == len(comparison.regressions) > 0


def recorded_run() -> RunData:
    """400 requests through the real Recorder (the load side's path), 10 of them failed:
    TTFT 200 ms, 20 ms between chunks, 50 tokens, scheduled 1 ms before the send."""
    recorder = Recorder(goodput={"chat": GoodputLimits(ttft_ms=500.0)}, window_s=5.0)
    recorder.origin_s = 0.0
    ms = 1_000_000
    for i in range(400):
        start = i * 50 * ms
        record = RequestRecord(
            scenario="chat",
            start_ns=start,
            scheduled_ns=start - ms,
            turn=i % 2,
            chunk_ns=[start + 200 * ms + k * 20 * ms for k in range(50)],
            chunk_chars=[4] * 50,
            output_tokens=50,
            input_tokens=1000,
            intended_input_tokens=1000,
            intended_output_tokens=50,
        )
        record.end_ns = record.chunk_ns[-1] + ms
        if i % 40 == 0:
            record.fail(ErrorKind.HTTP_5XX, f"<b>boom {i}</b>", start + 5 * ms)
        recorder.record(record, wall_s=i * 0.05, stage="steady")
    windows = recorder.pop_windows(10**9)
    run = run_of(
        {"chat": recorder.buckets[("chat", "all")]},
        slo={"chat": [{"metric": "ttft_ms", "stat": "p99", "limit": 250.0, "kind": "max"}]},
        measured_s=20.0,
    )
    run.buckets.update(recorder.buckets)
    run.timeseries = [
        window_row(s, i, 5.0, b, {"users": 4, "in_flight": 2})
        for (s, i), b in sorted(windows.items())
    ]
    return run


def test_a_run_recorded_by_the_recorder_reports_what_was_sent(tmp_path: Path) -> None:
    outcome = write_results(tmp_path, recorded_run())
    chat = outcome.summary["scenarios"]["chat"]
    assert outcome.verdict == "pass"
    assert (chat["requests"]["ok"], chat["requests"]["failed"]) == (390, 10)
    assert chat["requests"]["errors"] == {"http_5xx": 10}
    assert chat["metrics"]["ttft_ms"]["p99"] == pytest.approx(200.0, rel=1e-3)
    assert chat["metrics"]["ttft_sched_ms"]["p50"] == pytest.approx(201.0, rel=1e-3)
    assert chat["metrics"]["itl_ms"]["p50"] == pytest.approx(20.0, rel=1e-3)
    assert chat["metrics"]["tpot_ms"]["p50"] == pytest.approx(20.0, rel=1e-3)
    assert chat["throughput"]["output_tokens_per_s"] == pytest.approx(390 * 50 / 20.0)
    assert chat["goodput"]["fraction"] == pytest.approx(390 / 400)
    assert chat["tokens"]["count_method"] == "usage"
    assert list(chat["ttft_by_turn_ms"]) == ["1", "2"]
    assert chat["stages"]["steady"]["requests"]["total"] == 400
    assert "&lt;b&gt;boom 0&lt;/b&gt;" in (tmp_path / "report.html").read_text()
    # requests end over 20 s of wall time: four 5 s windows, plus the header
    assert len((tmp_path / "timeseries.csv").read_text().splitlines()) == 5


def test_the_report_says_when_itl_rests_on_apportioned_tokens(tmp_path: Path) -> None:
    """A run whose requests' tokens were spread over their chunks by text
    length says what that can do to ITL's tail and how to get exact counts;
    a run counted exactly does not."""
    apportioned = realistic_run()
    write_results(tmp_path / "apportioned", apportioned)
    html = (tmp_path / "apportioned" / "report.html").read_text()
    n = apportioned.overall("chat").counters.chunk_token_methods["proportional"]
    assert f"{n:,} requests carried more tokens than chunks" in html
    assert "<code>request.continuous_usage: true</code>" in html

    exact = realistic_run()
    counters = exact.overall("chat").counters
    counters.chunk_token_methods.clear()
    counters.chunk_token_methods.update(exact=n)
    write_results(tmp_path / "exact", exact)
    html = (tmp_path / "exact" / "report.html").read_text()
    assert f"Tokens per chunk for ITL: exact ({n:,})" in html
    assert "more tokens than chunks" not in html
