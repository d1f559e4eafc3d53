"""Every reader of metric names agrees with the catalogue (scenarios/metrics.py).

A run with a sample in every catalogued histogram and an SLO on every metric a
scenario may gate goes through the scenario schema, the judge, summary.json,
the terminal table, JUnit, summary.md, the HTML report, compare and the web
view's recorder: each must show every metric it is meant to, in its unit,
and refuse or leave out the rest.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import numpy as np
import pytest
from markupsafe import escape
from reportdata import bucket, record_all_us, request, run_of

from slogate import scenarios
from slogate.analysis.documents.contracts import Summary
from slogate.analysis.documents.summary import DETAILED, build_summary
from slogate.analysis.measurement.recorder import Bucket, Gaps, GoodputLimits, record_window
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.analysis.verdict.compare import compare
from slogate.locustfiles.webview import METRICS as WEB_VIEW_METRICS
from slogate.reports.charts import ANSWER_CURVES, CURVES, WINDOW_CHARTS
from slogate.reports.junit import junit_xml
from slogate.reports.markdown import md, summary_markdown
from slogate.reports.results import report_html
from slogate.reports.terminal import verdict_table
from slogate.scenarios import ScenarioError
from slogate.scenarios.json_schema import scenario_schema
from slogate.scenarios.metrics import (
    BY_KEY,
    BY_NAME,
    CATALOGUE,
    GOODPUT_LIMITS,
    HEADLINE,
    LAG,
    MS,
    SESSION,
    SLO_KEYS,
    names_of,
)
from slogate.scenarios.model import GoodputSpec

VALUE = 5.0  # every metric's samples: 5 ms, or a count of 5
LIMIT = 10.0
SAMPLES = 1000
RUN_WIDE = {"error_rate", "throughput", "goodput", "spec_acceptance_rate", "schema_validity"}
MINIMAL = """\
    name: every-metric
    workload: {kind: chat, input_tokens: 200, output_tokens: 32}
    """


def every_metric_run() -> tuple[dict, object]:
    """A run whose one scenario has VALUE in every catalogued histogram and an
    SLO ``p50 <= LIMIT`` on every metric a scenario may gate."""
    latencies = {m.name: np.full(SAMPLES, VALUE) for m in CATALOGUE if m.unit == MS}
    b = bucket(latencies)
    b.counters.reasoning_requests = SAMPLES  # else the answer's repeat the headline's
    for m in CATALOGUE:
        if m.unit != MS:
            record_all_us(b.histograms, m.name, np.full(SAMPLES, VALUE))
    slos = [{"metric": key, "stat": "p50", "limit": LIMIT, "kind": "max"} for key in SLO_KEYS]
    run = run_of({"chat": b}, slo={"chat": slos})
    return build_summary(run), run


@pytest.fixture(scope="module")
def judged() -> tuple[dict, object]:
    return every_metric_run()


def object_of(shape: dict) -> dict:
    """The mapping a (possibly nullable) section's shape describes."""
    return next(s for s in shape.get("anyOf", [shape]) if s.get("type") == "object")


def write(tmp_path: Path, slo: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(textwrap.dedent(MINIMAL) + slo)
    return path


def test_every_catalogued_metric_is_spelled_once() -> None:
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    assert len({m.key for m in CATALOGUE}) == len(CATALOGUE)
    assert all(m.label for m in CATALOGUE)


def test_the_scenario_file_takes_an_slo_on_every_metric_but_the_generators_lag(tmp_path) -> None:
    slo = "".join(f"  {key}: {{p99: {LIMIT}}}\n" for key in SLO_KEYS)
    [s] = scenarios.load(write(tmp_path, "slo:\n" + slo))
    assert [t.metric for t in s.slo.thresholds] == list(SLO_KEYS)
    for lag in names_of(LAG):
        with pytest.raises(ScenarioError, match=f"{lag}_ms"):
            scenarios.load(write(tmp_path, f"slo:\n  {lag}_ms: {{p99: 5}}\n"))


def test_the_json_schema_offers_the_same_slo_keys() -> None:
    slo = object_of(scenario_schema()["else"]["properties"]["slo"])["properties"]
    assert set(slo) - RUN_WIDE == set(SLO_KEYS)
    goodput = set(object_of(slo["goodput"])["properties"]) - {"min"}
    assert goodput == set(GOODPUT_LIMITS)


def test_the_goodput_limits_are_the_scenarios_and_the_recorders() -> None:
    spec = {f.name for f in dataclasses.fields(GoodputSpec)} - {"min_fraction"}
    assert spec == set(GOODPUT_LIMITS)
    assert set(GOODPUT_LIMITS) <= {f.name for f in dataclasses.fields(GoodputLimits)}


def test_the_judge_reads_every_slo_metric_in_its_unit(judged) -> None:
    summary, _ = judged
    entries = summary["scenarios"]["chat"]["slo"]
    assert [e["metric"] for e in entries] == list(SLO_KEYS)
    for entry in entries:
        assert entry["value"] == pytest.approx(VALUE, rel=1e-3), entry["metric"]
        assert entry["verdict"] == "pass", entry
    assert summary["verdict"] == "pass"


def test_the_summary_details_every_latency_but_the_session_parts(judged) -> None:
    summary, _ = judged
    metrics = summary["scenarios"]["chat"]["metrics"]
    expected = [m.key for m in CATALOGUE if m.unit == MS and SESSION not in m.groups]
    assert list(metrics) == expected
    assert [f"{name}_ms" for name in DETAILED] == expected


def test_the_terminal_junit_and_markdown_show_each_slo_in_its_unit(judged) -> None:
    summary, _ = judged
    table = verdict_table(summary, "report.html")
    junit = junit_xml(summary).decode()
    markdown = summary_markdown(summary, "report.html")
    for key in SLO_KEYS:
        row = next(line for line in table.splitlines() if f" {key} p50 " in line)
        assert (" ms [" in row) == (BY_KEY[key].unit == MS), row
        assert f"{key} p50" in junit
        row = next(line for line in markdown.splitlines() if f" {md(key)} p50 " in line)
        assert f"| {LIMIT:g} {BY_KEY[key].unit} |" in row, row


def test_the_report_labels_every_detailed_metric_and_each_slo(judged) -> None:
    summary, run = judged
    html = report_html(Summary.model_validate(summary), run, None)
    for name in DETAILED:
        assert escape(BY_NAME[name].label) in html, name
    for key in SLO_KEYS:
        assert key in html


def test_the_charts_draw_catalogued_metrics() -> None:
    drawn = {*CURVES, *ANSWER_CURVES, *WINDOW_CHARTS}
    for _, beside in (*CURVES.values(), *ANSWER_CURVES.values()):
        drawn |= set(beside)
    assert drawn <= set(BY_NAME)


def test_compare_gates_on_the_gated_metrics_it_finds(judged) -> None:
    _, run = judged
    deltas = compare(run, run).deltas
    latencies = {d.metric for d in deltas if d.metric.endswith("_ms")}
    assert latencies == {m.key for m in CATALOGUE if m.gated}


def test_the_web_view_shows_the_headline_a_time_window_records() -> None:
    window = Bucket()
    record = request(ttft_ms=100.0)
    m = request_metrics(record)
    record_window(window, record, m, good=True, gaps=Gaps.of(m))
    assert WEB_VIEW_METRICS == HEADLINE
    assert all(name in window.histograms for name in HEADLINE)
